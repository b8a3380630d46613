package scripts

import (
	"context"
	"testing"
	"time"
)

func TestExpDepth(t *testing.T) {
	log, logs := newLog()
	s := load(t, Options{Log: log, Limits: Limits{Call: 2 * time.Minute, Grace: time.Minute}}, "deepx", `
function describe(){ return [{name: "build"}, {name: "str"}] }
function build(){ var a=[]; for(var i=0;;i++){ a=[a]; if (i%20000==0) console.log(i) } }
function str(x){ var a=[]; for(var i=0;i<x.n;i++){ a=[a] } var t0=Date.now(); var s = JSON.stringify(a); var t1=Date.now(); var u = String(a); var f = a.flat(Infinity); return s.length + " " + (t1-t0) + "ms " + u.length + " " + f.length }
`)
	res, _, _ := s.Call(context.Background(), "deepx__build", nil, nil)
	t.Log(res)
	ls := logs.lines()
	t.Log(ls[len(ls)-1]["console"])
	res, _, _ = s.Call(context.Background(), "deepx__str", map[string]any{"n": 250000}, nil)
	t.Log(res)
}
