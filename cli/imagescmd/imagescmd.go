// Package imagescmd is harness images: what the image cache holds (the
// unpacked images and the images pulled from registries), pruning it, and
// filling it ahead of a run from a task set's images.
package imagescmd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/image"
	"harness/taskset"
)

// NewCmd returns the harness images command.
func NewCmd() *cli.Command {
	var (
		tf                 cli.TaskFlags
		olderThan          time.Duration
		all, dryRun, quiet bool
	)
	c := &cli.Command{
		Name:  "images",
		Usage: "images [list | prune [--older-than D | --all] [--dry-run] | pull TASKS | save DIR|FILE.tar [REF...] | load DIR|FILE.tar]",
		Short: "list, prune or fill the image cache",
		Long: `Without arguments (or with list), lists the image cache: each unpacked
image (reference, digest, size, when a run last used it, whether a run
or trial holds it now, the task set directories and prompts files that
ran in it) and each image pulled from a registry (reference, digest,
stored size, when it was pulled, layers, and likewise who ran in it).

prune removes the unpacked images no run holds that were last used more
than --older-than ago, the pulled images pulled before then, and the
pulled layers no remaining image needs; --all removes everything no run
holds; --dry-run says what would go. It prints what it freed.

pull TASKS fetches the images of a Harbor task directory or dataset into
the cache ahead of a run (as the run would, before its first agent).

save writes the pulled images (all, or the references named) as an OCI
image layout: a new or empty directory, or a tar archive of one when the
name ends in .tar. load adds such a layout's images to the cache, each
blob checked against its digest, by the full reference each entry of its
index.json carries. Together they move the cache to a machine without
the network, where runs take --image-policy never.

Examples:
  harness images
  harness images prune --older-than 720h --dry-run
  harness images pull tb2/ --cache-dir /shared/harness-images
  harness images save tb2-images.tar
  harness images load tb2-images.tar`,
		Flags: pflag.NewFlagSet("images", pflag.ContinueOnError),
	}
	tf.Add(c.Flags)
	c.Flags.DurationVar(&olderThan, "older-than", 0, "prune: what was not used for this `duration` (720h)")
	c.Flags.BoolVar(&all, "all", false, "prune: everything no run holds")
	c.Flags.BoolVar(&dryRun, "dry-run", false, "prune: say what would go, remove nothing")
	c.Flags.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	c.Run = func(ctx context.Context, e *cli.Env, args, _ []string) error {
		store, err := tf.Store(nil)
		if err != nil {
			return err
		}
		sub := "list"
		if len(args) > 0 {
			sub, args = args[0], args[1:]
		}
		switch sub {
		case "list":
			if len(args) != 0 {
				return cli.Usagef("images list takes no arguments")
			}
			return list(e, store)
		case "prune":
			if len(args) != 0 {
				return cli.Usagef("images prune takes no arguments")
			}
			if !all && olderThan <= 0 {
				return cli.Usagef("images prune: give --older-than DURATION or --all")
			}
			p, err := store.Prune(image.PruneOptions{OlderThan: olderThan, All: all, DryRun: dryRun})
			if err != nil {
				return err
			}
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			for _, en := range p.Entries {
				fmt.Fprintf(e.Stdout, "%s unpacked %s (%s)\n", verb, en.Ref, image.Bytes(en.Size))
			}
			for _, r := range p.Refs {
				fmt.Fprintf(e.Stdout, "%s pulled %s\n", verb, r)
			}
			fmt.Fprintf(e.Stdout, "%s %d unpacked images, %d pulled images, %d blobs (%s): %s in all\n", verb, len(p.Entries), len(p.Refs), p.Blobs, image.Bytes(p.BlobBytes), image.Bytes(p.Bytes))
			return nil
		case "pull":
			if len(args) != 1 {
				return cli.Usagef("images pull takes one task directory or dataset")
			}
			set, err := cli.LoadTasks(e, args[0], quiet)
			if err != nil {
				return err
			}
			return pullTasks(ctx, e, store, set, quiet)
		case "save":
			if len(args) < 1 {
				return cli.Usagef("images save takes a directory or FILE.tar, then the references to save (default all)")
			}
			saved, err := store.Pulls().Save(args[0], args[1:])
			if err != nil {
				return cli.Input(fmt.Errorf("images save: %w", err))
			}
			for _, r := range saved.Records {
				fmt.Fprintf(e.Stdout, "saved %s %s\n", r.Name, short(r.Digest))
			}
			fmt.Fprintf(e.Stdout, "saved %d images, %d blobs (%s) to %s\n", len(saved.Records), saved.Blobs, image.Bytes(saved.Bytes), args[0])
			return nil
		case "load":
			if len(args) != 1 {
				return cli.Usagef("images load takes one directory or FILE.tar")
			}
			loaded, err := store.Pulls().Load(args[0])
			if err != nil {
				return cli.Input(fmt.Errorf("images load: %w", err))
			}
			for _, r := range loaded.Records {
				fmt.Fprintf(e.Stdout, "loaded %s %s\n", r.Name, short(r.Digest))
			}
			fmt.Fprintf(e.Stdout, "loaded %d images, %d new blobs (%s)\n", len(loaded.Records), loaded.Blobs, image.Bytes(loaded.Bytes))
			return nil
		}
		return cli.Usagef("images: unknown subcommand %q (list, prune, pull, save, load)", sub)
	}
	return c
}

func list(e *cli.Env, store *image.Store) error {
	entries, err := store.Entries()
	if err != nil {
		return err
	}
	recs, err := store.Pulls().Records()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "UNPACKED\tDIGEST\tSIZE\tLAST USED\tIN USE\tUSED BY")
	var total int64
	for _, en := range entries {
		inUse := ""
		if en.InUse {
			inUse = "yes"
		}
		total += en.Size
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", en.Ref, short(en.Digest), image.Bytes(en.Size), en.LastUsed.Format(time.DateTime), inUse, strings.Join(en.UsedBy, ", "))
	}
	fmt.Fprintln(w, "\nPULLED\tDIGEST\tSTORED\tPULLED\tLAYERS\tUSED BY")
	for _, r := range recs {
		users := strings.Join(store.Users(image.PulledKey(r.Digest)), ", ")
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", r.Name, short(r.Digest), image.Bytes(r.Size), r.Pulled.Local().Format(time.DateTime), r.Layers, users)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "%d unpacked images, %s; %d pulled images\n", len(entries), image.Bytes(total), len(recs))
	return nil
}

// pullTasks fetches the images of set's tasks into store as a run does
// before its first agent, showing the pulls on stderr as a run does
// (unless quiet); once they are over it says on stdout, in the tasks'
// order, how each image was had. A task whose image cannot be had is an
// input error.
func pullTasks(ctx context.Context, e *cli.Env, store *image.Store, set *taskset.Set, quiet bool) error {
	var (
		mu  sync.Mutex
		got = map[string]taskset.Fetched{}
	)
	o := taskset.ResolveOptions{OnFetch: func(f taskset.Fetched) {
		mu.Lock()
		got[f.Ref] = f
		mu.Unlock()
	}}
	done := func() {}
	if !quiet {
		done = cli.ShowPulls(e, store, &o)
	}
	failed := set.Fetch(ctx, store, o)
	done()
	if ctx.Err() != nil {
		return cli.WithCode(cli.ExitInterrupted, ctx.Err())
	}
	said := map[string]bool{}
	for _, t := range set.Tasks {
		ref, _ := t.ImageChoice(false)
		f, ok := got[ref]
		if !ok || said[ref] || f.Err != nil {
			continue
		}
		said[ref] = true
		if f.Pulled {
			fmt.Fprintf(e.Stdout, "pulled %s: %d layers, %s fetched of %s\n", f.Ref, f.Layers, image.Bytes(f.Fetched), image.Bytes(f.Total))
		} else {
			fmt.Fprintf(e.Stdout, "have %s\n", f.Ref)
		}
	}
	for _, t := range set.Tasks {
		ref, _ := t.ImageChoice(false)
		if err := failed[ref]; err != nil {
			return cli.Input(fmt.Errorf("task %s: %w", t.Name, err))
		}
	}
	return nil
}

// short is a digest as people read it: its first 12 hex digits.
func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}
