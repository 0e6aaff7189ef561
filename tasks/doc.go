// Package tasks is the registry and process runner behind .rubino/agents:
// background subagents that any agent, a shell user with cat, or the CLI can
// list, steer, answer, approve and stop through files.
//
//   - Registry holds every task under ONE mutex (docs/DESIGN.md#task-registry).
//     Reserve is the single point where the three caps are enforced
//     (max_depth, max_children_per_node, max_concurrent_total:
//     docs/DESIGN.md#task-caps); Steer and Complete share the mutex, so a
//     steer note racing a task's end is either delivered, reported
//     undelivered, or refused, never lost (docs/DESIGN.md#task-steering);
//     ask and approval gates (Gate) park a task until a human or its owner
//     decides (docs/DESIGN.md#task-gates), and a stop cascades to the
//     gates and processes of every descendant
//     (docs/DESIGN.md#task-lifecycle). Finished tasks are pruned beyond
//     keep_finished, never breaking the owner chain of a live task
//     (docs/DESIGN.md#task-pruning).
//   - Runner starts each task as a real process in its own process group and
//     POSIX session, as its spawner (SpawnerOf: uid, groups, environment,
//     namespaces; docs/DESIGN.md#task-credentials), with RUBINO_TASK_ID,
//     RUBINO_SESSION and RUBINO_MOUNT in its environment and its working
//     directory at the mount root as the spawner sees it; it feeds
//     stdout and stderr to the live output tail and to a log file, records
//     the result, and on teardown (CancelAll) kills every process group and
//     waits, so no task outlives the mount.
//   - Runner is a ctltree.Feature: its entry "agents" renders the registry
//     as a directory in the Plan 9 clone/ctl style (see agentsReadme for the
//     file list), and every operation is authorised by the caller's session
//     and uid (docs/DESIGN.md#task-authority): a task may act only on its own
//     descendants, a session on the tasks it spawned, a caller outside every
//     session on its uid's tasks (the mount owner and root on all); only the
//     task itself may ask, answer-read, write its result or drain its inbox.
//     Listings show only what the caller may act on.
//
// Files by concern:
//
//	status.go               statuses, live / terminal, glyphs
//	caps.go                 the three caps, CapError, the cap check
//	registry.go             Registry, Task and its entry, errors, Canceler
//	lifecycle.go            Reserve, Attach, Complete, stops and the cascade, Await
//	query.go                listings and lookups (Running, List, Find, Remove)
//	tree.go                 owners: children, descendants, ancestors
//	prune.go                Prune: bounding the finished tasks
//	activity.go             the activity ring, the output tail, probes
//	steer.go                the steer queue and the undelivered notes
//	gate.go                 Gate, and the registry's ask and approval state
//	naming.go               task ids and session names (task-ID)
//	spec.go                 parsers of what callers write (spec, ctl, ask)
//	config.go               Config, its JSON form (agents.json, read by package config)
//	runner.go               Runner: spawn, teardown, Feature and status
//	process.go              starting a task's process, its output
//	spawner.go              Spawner: who a task runs as, its command and environment
//	spawner_proc.go         SpawnerOf: the spawner from /proc, its namespaces
//	reap.go                 reaping a task's process, proc (the Canceler)
//	logs.go                 the per-task log files and their pruning
//	proc_linux.go           /proc reads, session-wide signals
//	authority.go            who a caller is, and what it may do
//	files.go                the agents directory, the errno table, clone
//	files_task.go           per-task files: activity, result, ctl, inbox, wait
//	files_gates.go          ask, answer and approval files
//	files_tree.go           the tree and waiting listings
//
// The package imports ctltree but never go-fuse.
package tasks
