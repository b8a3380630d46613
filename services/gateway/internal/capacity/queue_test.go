package capacity

import "testing"

// TestOpenQueueOrder: calls wait in the order they came, the head holds
// the turn, and a full queue refuses the next.
func TestOpenQueueOrder(t *testing.T) {
	q := &openQueue{max: 2}
	a, _ := q.join()
	b, _ := q.join()
	if _, ok := q.join(); ok {
		t.Fatal("join() on a full queue = ok, want refused")
	}
	if got := []int{q.place(a), q.place(b)}; got[0] != 1 || got[1] != 2 {
		t.Errorf("places = %v, want [1 2]", got)
	}
	select {
	case <-b.turn:
		t.Fatal("the second call has the turn before the first left")
	default:
	}
	q.leave(a)
	select {
	case <-b.turn:
	default:
		t.Fatal("the second call did not get the turn when the first left")
	}
	if q.place(b) != 1 || q.Len() != 1 {
		t.Errorf("after the head left: place %d, len %d; want 1, 1", q.place(b), q.Len())
	}
}
