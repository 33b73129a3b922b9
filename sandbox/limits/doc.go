// Package limits caps the resources of a sandboxed command and all it
// starts: memory, tasks (processes and threads), CPU and the disk its
// workspace takes. It ends the command when a cap is hit and says which.
//
// # How each cap is enforced
//
// New picks, per cap, the strongest means the host allows:
//
//   - cgroup v2, when controllers are delegated to a directory this
//     process can write: Options.CgroupParent when given (it must work),
//     else this process's own cgroup, else its parent (where systemd puts
//     a user's scopes: a sibling group needs no controllers enabled in a
//     cgroup that holds processes). Caps: memory.max (with memory.swap.max
//     0 and memory.oom.group 1), pids.max, cpu.max.
//   - cgroup v1, for each controller left that has a writable hierarchy:
//     a group under this process's own group there. Caps:
//     memory.limit_in_bytes (and memory.memsw.limit_in_bytes), pids.max,
//     cpu.cfs_quota_us over cpu.cfs_period_us.
//   - otherwise memory gets RLIMIT_DATA per process (not RLIMIT_AS: V8
//     and Go reserve large address ranges they never use), set above the
//     cap (see rlimitSlack) as a backstop, and the watcher sums the
//     resident memory of the sandbox's processes against the cap itself;
//     pids get only the watcher counting tasks (RLIMIT_NPROC counts all
//     of a user's processes, not the sandbox's, and is not enforced for
//     root), so a fast fork bomb can overshoot for up to one poll; cpus
//     get nothing (no rlimit caps a rate) and are reported not applied.
//   - disk is always a watcher: the allocated size of Options.DiskDirs,
//     walked at each poll, less often for big trees so that at most a
//     tenth of the time goes to walking (a 100 ms walk is repeated once a
//     second).
//
// A v2 group is also made without any controller when the hierarchy is
// writable: it tracks the sandbox's processes exactly and kills them with
// cgroup.kill. Each cap that is approximated or not applied comes back
// from New as a warning naming its flag and the reason; Applied says how
// every cap is enforced, for the record's provenance.
//
// The watcher polls every 100 ms: v2 memory.events (oom_kill, oom) and
// pids.events (max); v1 memory.oom_control (oom_kill, under_oom; not
// memory.failcnt, which also counts page cache reclaimed at the limit)
// and pids.events (max); the fallback sums; the disk. On the first hit it
// kills every process of the sandbox (cgroup.kill, then SIGKILL to each
// pid in cgroup.procs until none is left; without a cgroup, the process
// tree under the started pid, again and again until it is gone) and then
// calls the caller's kill. Hit names the cap with its flag, such as
// "memory over the 512 MiB cap (--sandbox-memory)".
//
// # Defaults
//
// DefaultCaps keeps the host alive without getting in an agent's way:
// memory half the RAM up to 4 GiB, 4096 tasks (64 per CPU on big
// machines), no CPU cap, 10 GiB of disk; see DefaultCapsFor for why.
// The caps hold per command: N cases run at once may together use N
// times the memory cap.
//
// # Integration in the bwrap backend
//
// The command must be in its cgroups before it can start anything, so
// it starts under a small wrapper outside bwrap, a /bin/sh script, which
// joins the cgroups, sets the rlimits and execs bwrap (same pid):
//
//  1. Flags (capture, run, suite, check): --sandbox-memory SIZE and
//     --sandbox-disk SIZE parsed with ParseSize ("512M", "4G", "0" = no
//     cap), --sandbox-pids N with ParsePids, --sandbox-cpus N with
//     ParseCPUs ("1.5"), each defaulting to DefaultCaps' field;
//     --sandbox-cgroup DIR to Options.CgroupParent.
//  2. Per command (Wrap): g, warnings, err := limits.New(caps,
//     limits.Options{CgroupParent: dir, DiskDirs: []string{workspace,
//     home}}). Show the warnings once per run (they are the same for
//     every command of a run: keep a set). Prefix the bwrap argv with
//     g.WrapperArgs() (nil: run bwrap as is). Optionally cap the private
//     /tmp with TmpfsSizeArgs placed just before "--tmpfs", "/tmp" (bwrap
//     0.8 or later; under a memory cgroup tmpfs pages count against the
//     memory cap anyway).
//  3. After cmd.Start: g.Start(cmd.Process.Pid, kill) with kill ending
//     the command the sandbox's own way (its process group).
//  4. After cmd.Wait: g.Close() (final check, leftovers killed, cgroups
//     removed), then g.Hit(): when not "", the case fails with error
//     class resource_limit and g.Hit() as message, whatever the agent
//     said. Put g.Applied() in provenance.sandbox.
//
// A starting cost: the wrapper is one more exec, of /bin/sh (see
// BenchmarkStartCappedBwrap). Where only cgroup v2 is needed (no
// rlimit), os/exec's SysProcAttr.UseCgroupFD could start bwrap straight
// into its group instead.
package limits
