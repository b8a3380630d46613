package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Memory is the memory of a process tree, from /proc.
type Memory struct {
	Procs int
	// RSS sums each process's resident set (shared pages counted once per
	// process, so it overstates a multi-process Chromium).
	RSS int64
	// PSS sums each process's proportional set size (shared pages split
	// among the processes that share them): the fairer total.
	PSS int64
}

// TreeMemory sums the memory of pid and all its descendants (Linux only).
func TreeMemory(pid int) (Memory, error) {
	var m Memory
	err := walkTree(pid, func(p int) error {
		rss, pss, err := procMemory(p)
		if err == nil {
			m.Procs++
			m.RSS += rss
			m.PSS += pss
		}
		return err
	})
	return m, err
}

// walkTree calls visit for pid and each of the descendants it has now. An
// error of visit fails the walk for pid itself; a descendant's is skipped
// (it exited meanwhile).
func walkTree(pid int, visit func(p int) error) error {
	children, err := childMap()
	if err != nil {
		return err
	}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		queue = append(queue, children[p]...)
		if err := visit(p); err != nil && p == pid {
			return err
		}
	}
	return nil
}

// CPUTime is the user and system CPU time process pid has used so far.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
	}
	// Fields after the command (which may hold spaces) start after ")".
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("CPU time of process %d: short /proc stat", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / hz, nil
}

// TreeCPU sums the CPU time of pid and the descendants it has now (a
// child that exited counts only once its parent reaped it).
func TreeCPU(pid int) (time.Duration, error) {
	var sum time.Duration
	err := walkTree(pid, func(p int) error {
		d, err := CPUTime(p)
		sum += d
		return err
	})
	return sum, err
}

// childMap maps each pid to its children's pids.
func childMap() (map[int][]int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	out := make(map[int][]int)
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		out[ppid] = append(out[ppid], pid)
	}
	return out, nil
}

// procMemory reads Rss and Pss (bytes) of one process from smaps_rollup,
// falling back to status (Rss only, Pss = Rss) where it is missing.
func procMemory(pid int) (rss, pss int64, err error) {
	if rss, pss, err = readKB(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Rss:", "Pss:"); err == nil && rss > 0 {
		return rss, pss, nil
	}
	rss, _, err = readKB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:", "")
	return rss, rss, err
}

func readKB(path, key1, key2 string) (v1, v2 int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		n, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case key1:
			v1 = n * 1024
		case key2:
			v2 = n * 1024
		}
	}
	return v1, v2, sc.Err()
}

// Chromium is a running Chromium browser process (not one of its helpers).
type Chromium struct {
	PID  int
	Exe  string   // the executable, resolved from /proc/PID/exe
	Args []string // the command line without the executable
}

// FindChromium returns the Chromium browser process started by pid or one
// of its descendants: the first one whose command line has a
// --remote-debugging flag and no --type (helpers have --type).
func FindChromium(pid int) (*Chromium, error) {
	children, err := childMap()
	if err != nil {
		return nil, err
	}
	queue := append([]int(nil), children[pid]...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		queue = append(queue, children[p]...)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		helper, debug := false, false
		for _, a := range args[1:] {
			helper = helper || strings.HasPrefix(a, "--type=")
			debug = debug || strings.HasPrefix(a, "--remote-debugging")
		}
		if helper || !debug {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p))
		if err != nil {
			exe = args[0]
		}
		return &Chromium{PID: p, Exe: exe, Args: args[1:]}, nil
	}
	return nil, fmt.Errorf("no Chromium browser process under pid %d", pid)
}
