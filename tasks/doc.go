// Package tasks is the registry and process runner behind .rubino/agents:
// background subagents that any agent, a shell user with cat, or the CLI can
// list, steer, answer, approve and stop through files.
//
// The semantics are those of the seed registry (Rubino::Tools::
// BackgroundTasks), translated to Go and to OS processes:
//
//   - Registry holds every task under ONE mutex. Reserve is the single point
//     where the three caps are enforced (max_depth, max_children_per_node,
//     max_concurrent_total); Steer and Complete share the mutex, which closes
//     the seed's H5 drain/complete race; ask and approval gates (Gate) park a
//     task until a human or its owner decides, and a stop cascades to the
//     gates of every descendant.
//   - Runner starts each task as a real process in its own process group and
//     POSIX session, with RUBINO_TASK_ID, RUBINO_SESSION and RUBINO_MOUNT in
//     its environment and its working directory at the mount root; it feeds
//     stdout and stderr to the live output tail and to a log file, records
//     the result, and on teardown (CancelAll) kills every process group and
//     waits, so no task outlives the mount.
//   - Runner.Node renders the registry as a ctltree directory in the Plan 9
//     clone/ctl style (see agentsReadme for the file list), and authorises
//     every operation by the caller's session: a task may act only on its
//     own descendants, only the task itself may ask, answer-read, write its
//     result or drain its inbox, and any non-task caller may act on any task.
//
// The package imports ctltree but never go-fuse.
package tasks
