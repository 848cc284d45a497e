// start-gate holds a warm etcd member pod until the operator lets its etcd start, then becomes
// etcd (exec, same process), so the member starts at once in a container that already runs.
//
// Usage: START_TOKEN=... start-gate [--port 2391] [--within 300s] -- /usr/local/bin/etcd FLAGS...
//
//	start-gate --copy-to PATH   (the warm pod's first container puts it in the pod, as its
//	                            postStart hook: the kubelet starts etcd's container only after)
//	start-gate --hold           (that first container's own process: it waits to be stopped,
//	                            so the pod stays Ready)
//
// The operator connects to the port and sends the token and a newline; the gate answers "ok",
// closes its listener and execs the command with the environment minus START_TOKEN. A wrong
// token is turned away. Unopened after --within, it exits 1 (the operator sweeps the pod).
// Why it exists: supervisor/kube/warm_members.py and start_gate.py.
package main

import (
	"bufio"
	"crypto/subtle"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const tokenVariable = "START_TOKEN"

func main() {
	port := flag.Int("port", 2391, "TCP port to listen on")
	within := flag.Duration("within", 300*time.Second, "exit 1 when not opened within this long")
	copyTo := flag.String("copy-to", "", "copy this program to the path given, and exit")
	hold := flag.Bool("hold", false, "do nothing until stopped (SIGTERM or SIGINT), then exit 0")
	flag.Parse()
	if *copyTo != "" {
		copySelf(*copyTo)
		return
	}
	if *hold {
		holdUntilStopped()
		return
	}
	command, token := flag.Args(), os.Getenv(tokenVariable)
	if len(command) == 0 || token == "" {
		fail(2, "usage: %s=TOKEN start-gate [--port N] [--within D] -- COMMAND [ARGS...]", tokenVariable)
	}
	listener, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		fail(2, "listen: %v", err)
	}
	go func() {
		time.Sleep(*within)
		fail(1, "not opened within %s", *within)
	}()
	for {
		conn, err := listener.Accept()
		if err != nil {
			continue
		}
		if opened(conn, token) {
			listener.Close()
			// Sockets are close-on-exec in Go: the command inherits none of the gate's.
			err := syscall.Exec(command[0], command, environmentWithout(tokenVariable))
			fail(127, "exec %s: %v", command[0], err)
		}
		fmt.Fprintln(os.Stderr, "start-gate: a connection without the right token was turned away")
	}
}

// opened reads one line from conn and answers "ok" if it is the token.
func opened(conn net.Conn, token string) bool {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(conn, 256)).ReadString('\n')
	if err != nil {
		return false
	}
	given := strings.TrimSuffix(line, "\n")
	if subtle.ConstantTimeCompare([]byte(given), []byte(token)) != 1 {
		return false
	}
	_, err = conn.Write([]byte("ok\n"))
	return err == nil
}

func copySelf(to string) {
	self, err := os.Executable()
	if err != nil {
		fail(2, "copy: %v", err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		fail(2, "copy: %v", err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		fail(2, "copy: %v", err)
	}
}

// holdUntilStopped returns on SIGTERM or SIGINT. Asked for explicitly: as a container's first
// process (PID 1) a signal nobody handles is ignored, and the pod would take its whole grace
// period to go.
func holdUntilStopped() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

func environmentWithout(name string) []string {
	kept := []string{}
	for _, entry := range os.Environ() {
		if !strings.HasPrefix(entry, name+"=") {
			kept = append(kept, entry)
		}
	}
	return kept
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "start-gate: "+format+"\n", args...)
	os.Exit(code)
}
