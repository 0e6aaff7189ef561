package tasks

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Starting a task inside a spawner's namespaces (docs/DESIGN.md#task-credentials):
// nsenter runs as root, so it gets joinEnv, never the spawner's
// environment (LD_PRELOAD and its kind would run code as root); the
// wrapper, once inside and under the spawner's uid, says "in" on
// descriptor 3 (a socket pair), then reads the environment as export
// lines and the go-ahead from it.

// joinEnv is nsenter's whole environment.
var joinEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// joinPrefix starts the wrapper of a task in a spawner's namespaces: it
// closes the /proc/PID descriptor, reports that it is in, reads the
// export lines up to "go" (anything else, or an end before "go", exits
// 125), then replaces nsenter's PATH by the spawner's environment.
const joinPrefix = `exec 4<&-
echo in >&3 || exit 125
nl='
'
s=
while IFS= read -r l <&3; do
  case $l in
  go) break ;;
  'export '*) s="$s$l$nl" ;;
  *) exit 125 ;;
  esac
done
[ "$l" = go ] || exit 125
exec 3<&-
unset PATH
eval "$s"
`

// joinWrapper is the whole wrapper of a task in a spawner's namespaces.
func joinWrapper(umask string) string {
	return umaskLine(umask) + joinPrefix + enterMount
}

// shellName is what exportScript passes: a name the shell can export.
var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// exportScript encodes env (KEY=VALUE) as one "export KEY='VALUE'" line
// each, newlines in values written as '"$nl"', then "go". Entries whose
// name is not a shell identifier are left out: a shell cannot pass them.
func exportScript(env []string) []byte {
	var b strings.Builder
	q := strings.NewReplacer(`'`, `'\''`, "\n", `'"$nl"'`)
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !shellName.MatchString(k) {
			continue
		}
		b.WriteString("export " + k + "='" + q.Replace(v) + "'\n")
	}
	b.WriteString("go\n")
	return []byte(b.String())
}

// joinBound bounds how long a spawn waits for nsenter to enter a
// spawner's namespaces and start the wrapper: milliseconds when healthy.
const joinBound = 10 * time.Second

// socketPair returns the two ends of a connected Unix stream socket pair,
// close-on-exec: the wrapper's end and the runner's.
func socketPair() (*os.File, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "task-go"), os.NewFile(uintptr(fds[1]), "task-go-runner"), nil
}

// awaitEntered waits at most bound for the wrapper's "in" line on the
// runner's end of the socket pair: it reports true once the wrapper runs
// inside the spawner's namespaces, false without error when the wrapper's
// end closed first (nsenter failed: its message is the task's last stderr
// line), and an error when bound passed (the caller then kills the task,
// which ends the read).
func awaitEntered(f *os.File, bound time.Duration) (bool, error) {
	got := make(chan bool, 1)
	go func() {
		b := make([]byte, 3)
		n, _ := io.ReadFull(f, b)
		got <- n == 3 && string(b) == "in\n"
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case ok := <-got:
		return ok, nil
	case <-t.C:
		return false, fmt.Errorf("nsenter did not start the task within %v", bound)
	}
}
