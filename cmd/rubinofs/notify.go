package main

// systemd readiness notification (sd_notify(3)) through coreos/go-systemd's
// daemon package. With $NOTIFY_SOCKET set (a Type=notify unit):
//
//   - the foreground `rubinofs mount` sends READY=1 once the mount answers and
//     STOPPING=1 when it starts unmounting (SIGINT/SIGTERM, or unmounted from
//     outside);
//   - `rubinofs mount --daemon` sends READY=1 with MAINPID= the forked
//     daemon's pid once the daemon reports the mount answering, so systemd
//     follows the daemon after the parent exits; the daemon itself sends only
//     STOPPING=1 (a READY=1 from a process that is not yet the unit's main
//     pid would be dropped under the default NotifyAccess=main).
//
// Without $NOTIFY_SOCKET every call is a no-op. A failed send is logged and
// never fatal: the mount works whether or not systemd listens.

import (
	"fmt"
	"log"
	"os"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
)

// sdNotify sends state (newline-separated KEY=VALUE assignments) to
// $NOTIFY_SOCKET, keeping the variable for later messages.
func sdNotify(state string) {
	if _, err := sddaemon.SdNotify(false, state); err != nil {
		log.Printf("sd_notify %q: %v", state, err)
	}
}

// notifyReady tells systemd that the mount at mountpoint answers. mainPID is
// the process that serves it: when it is not the caller (--daemon), MAINPID=
// hands the unit over to it.
func notifyReady(mountpoint string, mainPID int) {
	state := fmt.Sprintf("%s\nSTATUS=serving %s", sddaemon.SdNotifyReady, mountpoint)
	if mainPID != os.Getpid() {
		state += fmt.Sprintf("\nMAINPID=%d", mainPID)
	}
	sdNotify(state)
}

// notifyStopping tells systemd that the mount at mountpoint is going away.
func notifyStopping(mountpoint string) {
	sdNotify(fmt.Sprintf("%s\nSTATUS=unmounting %s", sddaemon.SdNotifyStopping, mountpoint))
}
