package fence

import (
	"sync"
	"testing"
)

func TestFence(t *testing.T) {
	var f Fence[string]
	steps := []struct {
		token int64
		value string
		want  bool
	}{
		{0, "zero", false},
		{-1, "negative", false},
		{12, "new owner", true},
		{11, "stale owner", false},
		{12, "same lease again", true},
		{13, "next owner", true},
	}
	for _, s := range steps {
		if got := f.TryWrite(s.token, s.value); got != s.want {
			t.Errorf("TryWrite(%d) = %v, want %v", s.token, got, s.want)
		}
	}
	v, last := f.Value()
	if v != "next owner" || last != 13 {
		t.Errorf("Value = %q, %d", v, last)
	}
	if a, r := f.Counts(); a != 3 || r != 3 {
		t.Errorf("Counts = %d, %d; want 3, 3", a, r)
	}
}

func TestFence_Concurrent(t *testing.T) {
	var f Fence[int64]
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(1); i <= 1000; i++ {
				f.TryWrite(i, i)
			}
		}()
	}
	wg.Wait()
	v, last := f.Value()
	if v != 1000 || last != 1000 {
		t.Fatalf("Value = %d, %d; want 1000, 1000", v, last)
	}
	a, r := f.Counts()
	if a+r != 8000 || a < 1000 {
		t.Fatalf("Counts = %d, %d", a, r)
	}
}
