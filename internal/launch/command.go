package launch

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Command is a process to start with Spawn.
type Command struct {
	// Name labels the process in errors (default Args[0]).
	Name string
	// Args are the program and its arguments. Required.
	Args []string
	// Env is the process's whole environment (nil: the launcher's).
	Env []string
	// Dir is its working directory (default the launcher's).
	Dir string
	// LogPath, if set, is a file the process's output is appended to, as
	// well as kept in memory.
	LogPath string
}

// Process is a started process whose output (standard output and error,
// one stream) is read line by line into memory. Its methods are safe for
// concurrent use.
type Process struct {
	name string
	cmd  *exec.Cmd
	log  *lineLog
	done chan struct{} // closed once the process has exited and its output is read
	err  error         // cmd.Wait's, set before done is closed
}

// Spawn starts c (StartProcess: it dies with the launcher) in a process
// group of its own, and one goroutine that reads its output until it
// exits and then waits for it (Done). It does not wait for anything else.
func Spawn(c Command) (*Process, error) {
	if len(c.Args) == 0 {
		return nil, fmt.Errorf("launch: Command.Args is empty")
	}
	if c.Name == "" {
		c.Name = c.Args[0]
	}
	logf := io.Discard
	var closeLog func() error
	if c.LogPath != "" {
		f, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("cannot open %s's log: %w", c.Name, err)
		}
		logf, closeLog = f, f.Close
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", c.Name, err)
	}
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Env, cmd.Dir = c.Env, c.Dir
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = StartProcess(cmd)
	pw.Close()
	if err != nil {
		pr.Close()
		if closeLog != nil {
			closeLog()
		}
		return nil, fmt.Errorf("cannot start %s: %w", c.Name, err)
	}
	p := &Process{name: c.Name, cmd: cmd, log: newLineLog(), done: make(chan struct{})}
	go p.reap(pr, logf, closeLog)
	return p, nil
}

// reap copies the process's output to its log until the process ends,
// then waits for it.
func (p *Process) reap(out io.ReadCloser, logf io.Writer, closeLog func() error) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		io.WriteString(logf, line+"\n")
		p.log.add(line)
	}
	io.Copy(io.Discard, out) // a line past the scanner's limit: drain, so the process never blocks
	out.Close()
	if closeLog != nil {
		closeLog()
	}
	p.err = p.cmd.Wait()
	p.log.close()
	close(p.done)
}

// Pid is the process id (with a Prefix command that execs its program, the
// program's).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and all its output is read.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is what waiting for the process returned (nil after exit code 0);
// nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// ExitCode is the process's exit code, -1 while it runs or when a signal
// ended it.
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// State is how the process ended (nil while it runs).
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.done:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// Logs is what the process has written so far, one line per line.
func (p *Process) Logs() string { return strings.Join(p.log.snapshot(), "\n") }

// AwaitLog waits until a line of the process's output matches re and
// returns the match. It returns nil when the process exits first (exited
// is true) or timeout passes. It wakes on each new line, not on a timer.
func (p *Process) AwaitLog(re *regexp.Regexp, timeout time.Duration) (m []string, exited bool) {
	line, exited := p.log.await(0, re.MatchString, timeout)
	if line == nil {
		return nil, exited
	}
	return re.FindStringSubmatch(*line), false
}

// Signal sends sig to the process's group (the process, and anything a
// Prefix command left beside it). A process that has exited is not an
// error.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(-p.Pid(), sig); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("cannot signal %s (pid %d): %w", p.name, p.Pid(), err)
	}
	return nil
}

// Kill sends SIGKILL to the process's group and waits until it has
// exited.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM to the process's group and waits for the exit; after
// timeout it kills the group (Kill) and returns an error saying so. It
// also returns an error when the process exits with another code than 0.
// Blocks until the exit.
func (p *Process) Stop(timeout time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed:\n%s", p.name, timeout, tail(p.Logs(), 30))
	}
	if code := p.ExitCode(); code != 0 {
		return fmt.Errorf("%s exited %d after SIGTERM: %v:\n%s", p.name, code, p.err, tail(p.Logs(), 30))
	}
	return nil
}
