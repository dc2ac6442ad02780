package desktop

import (
	"fmt"
	"os"
	"os/user"
	"strconv"

	"github.com/godbus/dbus/v5"
)

// Env is what the helpers need to know about the session they act on.
type Env struct {
	Home    string
	UID     int
	Host    string
	Display string // the display number, "0"
}

// CurrentEnv reads the environment of the calling user: $HOME (else the
// passwd entry), the host name (uname, as xfce4-session takes it) and
// $DISPLAY (":0" when unset, the box's only display).
func CurrentEnv() (Env, error) {
	e := Env{UID: os.Getuid(), Home: os.Getenv("HOME")}
	if e.Home == "" {
		u, err := user.LookupId(strconv.Itoa(e.UID))
		if err != nil {
			return e, fmt.Errorf("no HOME and no passwd entry for uid %d: %w", e.UID, err)
		}
		e.Home = u.HomeDir
	}
	host, err := os.Hostname()
	if err != nil {
		return e, fmt.Errorf("host name: %w", err)
	}
	e.Host = host
	display := os.Getenv("DISPLAY")
	if display == "" {
		display = ":0"
	}
	if e.Display, err = DisplayNumber(display); err != nil {
		return e, fmt.Errorf("DISPLAY: %w", err)
	}
	return e, nil
}

// SessionFile is the path xfce4-session writes this host's save to:
// ~/.cache/sessions/xfce4-session-HOST:DISPLAY (through the link, in the
// state directory).
func (e Env) SessionFile() string {
	return e.Home + "/" + CacheLink + "/" + SessionFileName(e.Host, e.Display)
}

// ConnectSessionBus connects to the user's session bus:
// $DBUS_SESSION_BUS_ADDRESS, else the user manager's bus
// /run/user/UID/bus (dbus-user-session), never an autolaunched one.
func ConnectSessionBus(uid int) (*dbus.Conn, error) {
	addr := os.Getenv("DBUS_SESSION_BUS_ADDRESS")
	if addr == "" {
		addr = fmt.Sprintf("unix:path=/run/user/%d/bus", uid)
	}
	conn, err := dbus.Connect(addr)
	if err != nil {
		return nil, fmt.Errorf("connect to the session bus %s: %w", addr, err)
	}
	return conn, nil
}
