package testenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// childProcess is one binary of the cluster-grade control plane (controller-manager, scheduler, kwok) run beside
// the API server. Its output goes to <dir>/<name>.log, and to stderr too when QUARTET_TEST_LOGS is set.
type childProcess struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

func startChild(dir, name, binary string, args ...string) (*childProcess, error) {
	return startChildEnv(dir, name, nil, binary, args...)
}

// startChildEnv is startChild with env added to this process's environment.
func startChildEnv(dir, name string, env []string, binary string, args ...string) (*childProcess, error) {
	return startChildIn(dir, name, "", env, binary, args...)
}

// startChildIn is startChildEnv chrooted into root unless root is empty (binary and args are then paths inside
// root); as a non-root user it maps itself to root in a new user namespace, which grants the chroot inside it.
func startChildIn(dir, name, root string, env []string, binary string, args ...string) (*childProcess, error) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out io.Writer = log
	if os.Getenv("QUARTET_TEST_LOGS") != "" {
		out = io.MultiWriter(log, os.Stderr)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// A test binary killed by its timeout must not leave control-plane processes behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if root != "" {
		cmd.Dir = "/"
		cmd.SysProcAttr.Chroot = root
		if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
			cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
		}
	}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, binary, err)
	}
	p := &childProcess{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports the process's end as an error naming its log, or nil while it runs.
func (p *childProcess) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%w); see %s", p.name, p.err, p.log.Name())
	default:
		return nil
	}
}

// stop sends SIGTERM and waits up to 10s, then kills.
func (p *childProcess) stop() error {
	defer func() { _ = p.log.Close() }()
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New(p.name + " did not stop within 10s of SIGTERM and was killed")
	}
}
