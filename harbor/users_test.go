package harbor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/image"
)

// [agent] user and [verifier] user are read as names or uids (a number
// too); a bad value names the file, line and field.
func TestUserFieldsAreRead(t *testing.T) {
	task, err := Load(writeTask(t, `schema_version = "1.4"

[agent]
user = "tester"

[verifier]
user = 1234
`))
	if err != nil {
		t.Fatal(err)
	}
	c := task.Config
	if c.AgentUser != (UserField{User: "tester", Field: "agent.user", Line: 4}) || c.VerifierUser != (UserField{User: "1234", Field: "verifier.user", Line: 7}) {
		t.Fatalf("agent %+v, verifier %+v", c.AgentUser, c.VerifierUser)
	}
	if len(task.Unhonoured) != 0 {
		t.Fatalf("unhonoured %v", task.Unhonoured)
	}
	_, err = Load(writeTask(t, "version = \"1.0\"\n[agent]\nuser = [\"x\"]\n"))
	if err == nil || !strings.HasSuffix(err.Error(), "task.toml:3: agent.user: must be a user name or a uid, not [x]") {
		t.Fatalf("err = %v", err)
	}
}

// CheckUsers refuses, before anything runs, a user the image does not
// have, naming the file, line and field; without root, any user but
// root.
func TestCheckUsers(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\ntester:x:1234:1234::/home/tester:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\ntester:x:1234:\n"), 0o644)
	img := &image.Image{Ref: "img:1", Rootfs: root}

	task, err := Load(writeTask(t, "version = \"1.0\"\n[agent]\nuser = \"ghost\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = task.CheckUsers(img)
	want := filepath.Join(task.Dir, "task.toml") + `:3: agent.user: image user "ghost": not in the image's /etc/passwd (image img:1)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}

	task, err = Load(writeTask(t, "version = \"1.0\"\n[verifier]\nuser = \"tester\"\n[agent]\nuser = \"root\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = task.CheckUsers(img)
	if os.Geteuid() == 0 {
		if err != nil {
			t.Fatalf("as root: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), `task.toml:3: verifier.user: image user "tester" (uid 1234): only root maps to the invoking user without privileges`) {
		t.Fatalf("without root: %v", err)
	}
}
