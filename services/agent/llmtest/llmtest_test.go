package llmtest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func TestScript(t *testing.T) {
	s := New(t,
		Call(ToolCall{Name: "echo", Arguments: `{"text":"hi"}`}),
		FailRetryAfter(429, "slow down", "1"),
		Func(func(r Request) Step { return Reply("you said " + r.LastMessage().Content) }),
	)
	body := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"hel"},{"type":"text","text":"lo"}]}],
		"tools":[{"type":"function","function":{"name":"echo","description":"d","parameters":{"type":"object"}}}],"temperature":0.3}`

	// 1: a tool call, whole.
	var cc struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	resp := post(t, s.URL+"/chat/completions", body)
	if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil {
		t.Fatal(err)
	}
	if c := cc.Choices[0]; c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].ID != "call_1_0" ||
		c.Message.ToolCalls[0].Function.Arguments != `{"text":"hi"}` || c.Message.Content != nil {
		t.Errorf("reply = %+v", c)
	}
	// 2: an error with Retry-After, on the path without /v1.
	resp = post(t, strings.TrimSuffix(s.URL, "/v1")+"/chat/completions", body)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(b), `"message":"slow down"`) {
		t.Errorf("error reply %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	// 3: computed, streamed.
	resp = post(t, s.URL+"/chat/completions", strings.Replace(body, `"model":"m"`, `"model":"m","stream":true`, 1))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	var content strings.Builder
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatal(err)
		}
		content.WriteString(chunk.Choices[0].Delta.Content)
	}
	if !done || content.String() != "you said hello" {
		t.Errorf("streamed %q (done %v)", content.String(), done)
	}
	// 4: the script ran out.
	resp = post(t, s.URL+"/chat/completions", body)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(b), "no scripted step left for request 4") {
		t.Errorf("after the script: %d %s", resp.StatusCode, b)
	}
	// Other paths are 404.
	if resp := post(t, s.URL+"/embeddings", "{}"); resp.StatusCode != 404 {
		t.Errorf("/embeddings: %d", resp.StatusCode)
	}

	reqs := s.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	r := reqs[0]
	if r.Model != "m" || r.Stream || r.Temperature == nil || *r.Temperature != 0.3 || len(r.Messages) != 2 || r.Messages[1].Content != "hello" ||
		len(r.Tools) != 1 || r.Tools[0].Name != "echo" || r.Tools[0].Parameters["type"] != "object" || !reqs[2].Stream {
		t.Errorf("recorded %+v", r)
	}
}

func TestGate(t *testing.T) {
	g := NewGate()
	s := New(t, Step{Block: g, Text: "released"})
	got := make(chan string, 1)
	go func() {
		resp, err := http.Post(s.URL+"/chat/completions", "application/json", strings.NewReader(`{"messages":[]}`))
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-g.Entered()
	g.Release()
	if b := <-got; !strings.Contains(b, `"content":"released"`) {
		t.Errorf("after release: %s", b)
	}

	// A client that gives up while blocked is recorded as cancelled.
	g2 := NewGate()
	s2 := New(t, Step{Block: g2})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s2.URL+"/chat/completions", strings.NewReader(`{}`))
		_, err := http.DefaultClient.Do(req)
		errc <- err
	}()
	<-g2.Entered()
	cancel()
	<-errc
	select {
	case <-g2.Cancelled():
	case <-time.After(time.Minute):
		t.Fatal("the cancelled request was not noticed")
	}
	if r := s2.Requests(); len(r) != 1 || !r[0].Cancelled {
		t.Errorf("requests %+v", r)
	}
}
