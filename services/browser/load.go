package browser

// Load and memory pressure: every second (and after each session it opens
// or closes) the worker publishes its headroom on sov.browser.load
// (WorkerLoad: sessions against the limit, warm contexts, available
// memory), for the gateway to place new sessions on the worker with the
// most headroom (services/gateway/internal/fleet). Below
// Config.MinFreeMemory of available memory (the host's MemAvailable, or
// what the worker's cgroup v2 limit leaves, whichever is less) the worker
// is under pressure: it leaves the open queue group and refuses opens
// with NO_CAPACITY, so that Chromium is not killed by the OOM killer with
// every session in it; sessions already open carry on.

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
)

// loadEvery is how often the worker reads its memory and publishes its
// load.
const loadEvery = time.Second

// memAvailable returns the memory available to this process's cgroup and
// host, in bytes, and false when it cannot tell.
func memAvailable() (int64, bool) {
	avail, ok := meminfoAvailable()
	if limit, used, cok := cgroupMemory(); cok {
		if free := limit - used; !ok || free < avail {
			avail, ok = max(free, 0), true
		}
	}
	return avail, ok
}

func meminfoAvailable() (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// cgroupMemory reads the cgroup v2 limit and usage of this process; false
// without a limit.
func cgroupMemory() (limit, used int64, ok bool) {
	raw, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0, false
	}
	dir := "/sys/fs/cgroup"
	for _, line := range strings.Split(string(raw), "\n") {
		if p, found := strings.CutPrefix(line, "0::"); found {
			dir += strings.TrimSpace(p)
		}
	}
	read := func(name string) (int64, bool) {
		b, err := os.ReadFile(dir + "/" + name)
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64) // "max" fails: no limit
		return n, err == nil
	}
	if limit, ok = read("memory.max"); !ok {
		return 0, 0, false
	}
	used, ok = read("memory.current")
	return limit, used, ok
}

// kickLoad asks the load loop to publish now.
func (w *Worker) kickLoad() {
	select {
	case w.loadKick <- struct{}{}:
	default:
	}
}

// loadLoop reads the memory, updates the pressure state and publishes the
// worker's load until ctx ends; Run owns it.
func (w *Worker) loadLoop(ctx context.Context) {
	t := time.NewTicker(loadEvery)
	defer t.Stop()
	subject := browserbus.Load(w.c)
	for {
		avail, known := memAvailable()
		w.mu.Lock()
		pressure := known && w.cfg.MinFreeMemory > 0 && avail < w.cfg.MinFreeMemory
		if pressure != w.pressure {
			w.pressure = pressure
			w.updateOpenLocked()
			if pressure {
				w.log.Warn("memory pressure: taking no new sessions", "available_mib", avail>>20, "min_free_mib", w.cfg.MinFreeMemory>>20, "sessions", len(w.sessions))
			} else {
				w.log.Info("memory pressure over: taking sessions again", "available_mib", avail>>20)
			}
		}
		load := &browserv1.WorkerLoad{
			WorkerId:          w.cfg.ID,
			Sessions:          int32(len(w.sessions)),
			MaxSessions:       int32(w.cfg.MaxSessions),
			Warm:              int32(len(w.warm)),
			MemAvailableBytes: avail,
			MemMinFreeBytes:   max(w.cfg.MinFreeMemory, 0),
			Accepting:         w.acceptingLocked(),
			TimeMs:            time.Now().UnixMilli(),
		}
		w.mu.Unlock()
		if b, err := proto.Marshal(load); err == nil {
			_ = w.c.NATS().Publish(subject, b) // best effort: the next one follows in a second
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.loadKick:
		}
	}
}

// acceptingLocked reports whether the worker takes a new session now.
func (w *Worker) acceptingLocked() bool {
	return w.browser != nil && w.browser.Err() == nil && len(w.sessions) < w.cfg.MaxSessions && !w.stoppingLocked() && !w.pressure
}
