// Package egress lets a process in a bubblewrap sandbox reach the hosts of
// an allowlist and nothing else, and reports every connection it makes.
//
// The sandbox has a network namespace of its own (bwrap --unshare-net:
// loopback only, no route out). The one way out is a Proxy that runs in
// the harness process, outside the sandbox, on a unix socket in a host
// directory that is bound read-only into the sandbox at MountDir. Inside,
// a bridge (the harness binary re-executed as "harness __sandbox-bridge
// ... -- AGENT ARGS...", see BridgeMain) listens on the sandbox's loopback
// and carries each connection to that socket:
//
//   - an HTTP proxy on 127.0.0.1:3128 (another port when an allowed host
//     uses that one), for HTTP CONNECT and plain http:// requests, named by
//     HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and their lower-case forms, with
//     NO_PROXY empty (Session.Env);
//   - a plain TCP forward for each allowed HOST:PORT, for clients that
//     ignore proxy variables: an IP address listens on that address and
//     port; a name gets a loopback address of its own (127.0.0.2 on) that a
//     hosts file bound over /etc/hosts maps it to ("localhost" stays on
//     127.0.0.1). A rule without a port forwards 80 and 443.
//
// With Proxy.Redirect (where ProbeRedirect succeeds), every other TCP
// connection opened in the sandbox is redirected by an nftables table in
// its network namespace to one more listener of the bridge, which reads
// the original destination (SO_ORIGINAL_DST) and asks the proxy for a
// tunnel to it, as a forward does; a connection to a loopback address is
// first tried on a server of the sandbox's own (see redirectedConn).
//
// The proxy checks every request against the allowlist itself (the bridge
// and anything else in the sandbox can write to the socket, so nothing
// they say is trusted), dials the allowed ones, answers 403 to the others
// (a forward's or a redirected connection's client sees its connection
// reset) and reports each connection, allowed or denied, once it has
// ended. Without the redirection, connections the sandbox refuses by
// itself (a port nothing forwards, an address with no route) never leave
// it and are not reported.
//
// The bridge needs CAP_NET_BIND_SERVICE for ports below 1024 (443),
// CAP_NET_ADMIN to redirect, and CAP_SETPCAP to empty the bounding set.
// It binds its listeners, installs the redirection, drops
// every capability (effective, permitted, inheritable, ambient and
// bounding), sets no-new-privs and re-executes itself; only then does it
// start the agent, whose capability sets are therefore all empty even when
// it runs as root.
//
// # Integration into the bwrap backend
//
// One Proxy per run (its rules: ParseAllow of what follows "allow:" in
// --sandbox-network allow:HOST[:PORT],..., or DefaultRules of the agent's
// environment and command line when the flag is not given), one Session
// per sandboxed process:
//
//	s, err := proxy.NewSession(func(c egress.Connection) { /* a network step */ })
//	argv := []string{"bwrap"}
//	argv = append(argv, sandboxArgs...)   // must make /run a tmpfs (--tmpfs /run) first
//	argv = append(argv, s.BwrapArgs...)   // after the sandbox's own binds and cap options
//	argv = append(argv, "--")
//	argv = append(argv, s.Command(agentArgv)...)
//	env = append(env, s.Env...)           // last: overrides the agent's own proxy variables
//	// run; once the sandbox has exited:
//	s.Close()                             // waits (bounded) for the last reports
//
// s.BwrapArgs are:
//
//	--unshare-net --cap-drop ALL --cap-add CAP_SETPCAP
//	[--cap-add CAP_NET_BIND_SERVICE]                     (a port below 1024)
//	[--cap-add CAP_NET_ADMIN]                            (Redirect)
//	[--uid 0 --gid 0]                                    (either, when not root)
//	--ro-bind SOCKETDIR /run/harness-net
//	--ro-bind HOSTSFILE /etc/hosts
//	--ro-bind HARNESS-EXECUTABLE /run/harness-bin/harness
//
// They assume /run is a tmpfs in the sandbox (bwrap has to make the mount
// points) and that no later argument adds capabilities or drops these
// two (nor sets --uid after them): the bridge fails closed, with a message naming the missing
// option, when it cannot empty the bounding set or bind a port. As root,
// bwrap keeps every capability unless --cap-drop ALL is given; the bridge
// drops them all for the agent either way. Not as root, bwrap moves a
// sandbox whose uid is not 0 into a nested user namespace that does not
// own the network namespace, where no capability lets the bridge bind
// port 443: such sessions run the sandbox as uid 0 of its own user
// namespace (see Proxy.Unprivileged).
//
// The harness binary must dispatch to the bridge before anything else
// in main:
//
//	if len(os.Args) > 1 && os.Args[1] == egress.BridgeArg {
//		os.Exit(egress.BridgeMain(os.Args[2:]))
//	}
//
// The bridge runs the agent as its child with stdin, stdout and stderr
// inherited and its environment as given to bwrap; it forwards SIGTERM,
// SIGINT, SIGHUP and SIGQUIT and exits with the agent's status (or dies of
// the signal that killed it, so bwrap reports 128+N).
package egress
