package agent

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/agentbus"
	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// Version of the service, reported to `nats micro info`.
const Version = "0.1.0"

// Messages of runs ended by the service itself.
const (
	// ErrAgentRestarted ends the runs of a replica that died (or
	// restarted) mid-run.
	ErrAgentRestarted = "agent restarted"
	errTextShutdown   = "agent stopped: the agent replica shut down while the run was active; start it again"
)

// Agent is the agent orchestrator service: it takes runs on the bus, works
// on them (one goroutine each) and keeps their records in the KV bucket,
// so that any replica answers get, list and cancel.
type Agent struct {
	cfg         Config
	bus         *bus.Conn
	kv          jetstream.KeyValue
	svc         micro.Service
	log         *slog.Logger
	tracer      trace.Tracer
	incarnation string
	owner       string // "<name>/<incarnation>"
	cancelSub   *nats.Subscription

	mu     sync.Mutex
	runs   map[string]*run
	closed bool

	life  app.Lifetime   // Run (heartbeat, scan, health) until Close
	loops sync.WaitGroup // run goroutines
}

// New opens the agent's KV bucket, writes the replica's heartbeat, marks
// the runs of dead replicas (and of this replica's previous life) as
// ended, and registers the bus endpoints (sov.agent.*); ctx bounds the
// set-up. Call Run to keep the heartbeat and recovery scan going and to
// serve health, and Close when done.
func New(ctx context.Context, cfg Config, c *bus.Conn) (*Agent, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, app.UsageError{Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	kv, err := openBucket(ctx, c.NATS(), c.Prefix())
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, bus: c, kv: kv, runs: map[string]*run{}, incarnation: randomID(8),
		tracer: otel.Tracer("sovereign/agent")}
	a.owner = cfg.Name + "/" + a.incarnation
	a.log = cfg.Logger.With("component", "agent", "replica", a.owner)
	if err := a.beat(ctx); err != nil {
		return nil, fmt.Errorf("agent: write the replica heartbeat: %w", err)
	}
	a.cancelSub, err = c.NATS().Subscribe(a.cancelSubject(a.owner), a.onCancel)
	if err != nil {
		return nil, fmt.Errorf("agent: subscribe to cancellations: %w", err)
	}
	a.recover(ctx)
	if err := a.register(); err != nil {
		_ = a.cancelSub.Unsubscribe()
		return nil, err
	}
	// The subscriptions reach the server before New returns: a request
	// made right after is answered.
	if err := c.NATS().FlushWithContext(ctx); err != nil {
		_ = a.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("agent: register endpoints: %w", err)
	}
	provider := "none configured (set SOVEREIGN_LLM_BASE_URL and SOVEREIGN_LLM_MODEL, or the console's chat settings)"
	if cfg.BaseURL != "" {
		provider = redactURL(cfg.BaseURL)
	}
	a.log.Info("agent ready", "provider", provider, "model", cfg.Model, "max_runs", cfg.MaxRuns,
		"api_key_set", cfg.APIKey != "", "secret_key", cfg.SecretKey != nil)
	return a, nil
}

// Owner is this replica's "<name>/<incarnation>", as run records name it.
func (a *Agent) Owner() string { return a.owner }

// Run writes the heartbeat, runs the recovery scan and serves cfg.Listen
// (when set) until ctx ends or Close is called; the endpoints answer from
// New on. It returns nil when ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	return a.life.Run(ctx, func(ctx context.Context) error {
		if a.cfg.Listen != "" {
			if err := a.serveHealth(ctx); err != nil {
				return err
			}
		}
		a.background(ctx)
		return nil
	})
}

// Close stops taking requests, ends this replica's active runs in ERROR
// (saying the agent stopped), waits for their goroutines (up to 10 s,
// within ctx), stops Run and removes the heartbeat.
func (a *Agent) Close(ctx context.Context) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	runs := make([]*run, 0, len(a.runs))
	for _, r := range a.runs {
		runs = append(runs, r)
	}
	a.mu.Unlock()

	var err error
	if a.svc != nil {
		err = a.svc.Stop()
	}
	for _, r := range runs {
		r.cancel(errShutdown)
	}
	done := make(chan struct{})
	go func() { a.loops.Wait(); close(done) }()
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	select {
	case <-done:
	case <-wait.Done():
		a.log.Warn("runs still ending at shutdown")
	}
	cancel()
	err = errors.Join(err, a.life.Stop(ctx))
	if a.cancelSub != nil {
		_ = a.cancelSub.Unsubscribe()
	}
	ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = a.bus.NATS().FlushWithContext(ctx)
	_ = a.bus.Wait(ctx)
	if e, gerr := a.kv.Get(ctx, keyReplicaPrefix+a.cfg.Name); gerr == nil {
		var hb heartbeat
		if json.Unmarshal(e.Value(), &hb) == nil && hb.Incarnation == a.incarnation {
			_ = a.kv.Delete(ctx, keyReplicaPrefix+a.cfg.Name, jetstream.LastRevision(e.Revision()))
		}
	}
	return err
}

// Serve connects to NATS at natsURL and runs the agent until ctx ends:
// what `sovereign agent` does. When cfg.SecretKey is nil it loads the key
// from SOVEREIGN_SECRET_KEY(_FILE), if one is set.
func Serve(ctx context.Context, cfg Config, natsURL string) error {
	if cfg.SecretKey == nil {
		k, err := secrets.LoadKey(os.Getenv)
		switch {
		case errors.Is(err, secrets.ErrNoKey):
			slog.Info("agent: no secret key (SOVEREIGN_SECRET_KEY): an API key can be given as SOVEREIGN_LLM_API_KEY, not saved from the console")
		case err != nil:
			return app.UsageError{Err: err}
		default:
			cfg.SecretKey = k
		}
	}
	return app.Serve(ctx, natsURL, "sovereign-agent", func(ctx context.Context, c *bus.Conn) (*Agent, error) {
		return New(ctx, cfg, c)
	})
}

// background writes the heartbeat and runs the recovery scan and the
// pruning of old runs until ctx ends.
func (a *Agent) background(ctx context.Context) {
	beat := time.NewTicker(a.cfg.HeartbeatInterval)
	defer beat.Stop()
	scan := time.NewTicker(a.cfg.ScanInterval)
	defer scan.Stop()
	lastPrune := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			bctx, cancel := context.WithTimeout(ctx, a.cfg.HeartbeatInterval)
			if err := a.beat(bctx); err != nil && ctx.Err() == nil && !a.bus.NATS().IsClosed() {
				a.log.Warn("heartbeat not written", "err", err)
			}
			cancel()
		case <-scan.C:
			sctx, cancel := context.WithTimeout(ctx, a.cfg.ScanInterval)
			a.recover(sctx)
			if time.Since(lastPrune) > time.Hour {
				lastPrune = time.Now()
				a.prune(sctx)
			}
			cancel()
		}
	}
}

// recover ends the runs whose owner is gone: owned by this replica's name
// with another incarnation (this replica's previous life), or by a replica
// whose heartbeat is missing or older than HeartbeatStale. Their error is
// "agent restarted".
func (a *Agent) recover(ctx context.Context) {
	entries, err := a.scan(ctx, keyActivePrefix+">")
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("recovery scan failed", "err", err)
		}
		return
	}
	beats := map[string]*heartbeat{}
	alive := func(name, inc string) bool {
		hb, ok := beats[name]
		if !ok {
			hb = nil
			if e, err := a.kv.Get(ctx, keyReplicaPrefix+name); err == nil {
				var v heartbeat
				if json.Unmarshal(e.Value(), &v) == nil {
					hb = &v
				}
			} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
				return true // cannot tell: do not end anything
			}
			beats[name] = hb
		}
		return hb != nil && hb.Incarnation == inc && time.Since(time.UnixMilli(hb.UnixMilli)) <= a.cfg.HeartbeatStale
	}
	for _, e := range entries {
		id := strings.TrimPrefix(e.Key(), keyActivePrefix)
		owner := string(e.Value())
		name, inc, _ := strings.Cut(owner, "/")
		var why string
		switch {
		case owner == a.owner:
			a.mu.Lock()
			_, mine := a.runs[id]
			a.mu.Unlock()
			if mine || time.Since(e.Created()) < a.cfg.ScanInterval {
				continue // running here (or just being started)
			}
			why = "no goroutine works on it"
		case name == a.cfg.Name:
			why = "its replica restarted (incarnation " + inc + " is gone)"
		case !alive(name, inc):
			why = "its replica " + owner + " stopped sending heartbeats"
		default:
			continue
		}
		a.giveUp(ctx, id, e.Revision(), why)
	}
}

// giveUp ends a run whose owner is gone in ERROR "agent restarted".
func (a *Agent) giveUp(ctx context.Context, id string, activeRev uint64, why string) {
	changed := false
	rec, err := a.updateRun(ctx, id, func(r *agentv1.Run) error {
		changed = !terminal(r.State)
		if !changed {
			return errStop
		}
		r.State, r.Error, r.CurrentTool = agentv1.RunState_RUN_STATE_ERROR, ErrAgentRestarted, ""
		return nil
	})
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		a.log.Warn("could not end the run of a dead replica", "run", id, "err", err)
		return
	}
	_ = a.kv.Delete(ctx, keyActivePrefix+id, jetstream.LastRevision(activeRev))
	if changed && rec != nil {
		a.log.Warn("run ended: agent restarted", "run", id, "why", why)
		runsEnded.WithLabelValues("restarted").Inc()
		a.publish(rec)
	}
}

// prune removes ended runs older than RunRetention and heartbeats of
// replicas silent as long, then the delete markers.
func (a *Agent) prune(ctx context.Context) {
	cut := time.Now().Add(-RunRetention)
	entries, err := a.scan(ctx, keyRunPrefix+">")
	if err != nil {
		return
	}
	n := 0
	for _, e := range entries {
		r, err := decodeRun(e.Value())
		if err != nil || (terminal(r.State) && time.UnixMilli(r.UpdatedUnixMilli).Before(cut)) {
			if a.kv.Purge(ctx, e.Key(), jetstream.LastRevision(e.Revision())) == nil {
				n++
			}
		}
	}
	if beats, err := a.scan(ctx, keyReplicaPrefix+">"); err == nil {
		for _, e := range beats {
			if e.Created().Before(cut) {
				_ = a.kv.Purge(ctx, e.Key(), jetstream.LastRevision(e.Revision()))
			}
		}
	}
	_ = a.kv.PurgeDeletes(ctx)
	if n > 0 {
		a.log.Info("old runs removed", "count", n, "older_than", RunRetention.String())
	}
}

// cancelSubject is where the owner of a run hears that it was cancelled.
func (a *Agent) cancelSubject(owner string) string {
	name, inc, _ := strings.Cut(owner, "/")
	return a.bus.Subject("agent", "r", name, inc, "cancel")
}

// onCancel stops the run named in the message ("<id>\n<by>") at once.
func (a *Agent) onCancel(m *nats.Msg) {
	id, by, _ := strings.Cut(string(m.Data), "\n")
	a.mu.Lock()
	r := a.runs[id]
	a.mu.Unlock()
	if r != nil {
		r.requestCancel(by)
	}
}

// publish sends the run on sov.agent.run.event.<id>.
func (a *Agent) publish(r *agentv1.Run) {
	b, err := protoMarshal(r)
	if err != nil {
		return
	}
	if err := a.bus.NATS().Publish(agentbus.RunEvents(a.bus, r.GetId()), b); err != nil {
		a.log.Debug("run event not published", "run", r.GetId(), "err", err)
	}
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomID is n random base62 characters.
func randomID(n int) string {
	b := make([]byte, n)
	out := make([]byte, n)
	for i := 0; i < n; {
		if _, err := rand.Read(b); err != nil {
			panic(fmt.Sprintf("crypto/rand: %v", err))
		}
		for _, c := range b {
			if c < 248 && i < n { // 248 = 4*62: no modulo bias
				out[i] = base62[c%62]
				i++
			}
		}
	}
	return string(out)
}

// newUUID is a random (version 4) UUID, for new chats.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
