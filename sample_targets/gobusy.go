// gobusy: a Go program busy in two known functions, for livesym's Go tests (built
// with Debian's golang-go, stripped as services ship it and not; sample_targets.build_go).
//
//	main.sortWork  sorts 20,000 random ints (sort.Ints): ~90 % of the CPU
//	main.hashWork  SHA-256 of 64 KiB (crypto/sha256.block, assembly): ~7 %
//
// Prints "ready <pid>" once running; an optional first argument is a run time in
// seconds. The work runs on a goroutine of its own, its stack on Go's heap.
package main

import (
	"crypto/sha256"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"time"
)

var buf = make([]byte, 1<<16)

//go:noinline
func sortWork(n int) int {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = rand.Int()
	}
	sort.Ints(xs)
	return xs[n/2]
}

//go:noinline
func hashWork(data []byte) byte {
	sum := sha256.Sum256(data)
	return sum[0]
}

func work(done chan<- int) {
	acc := 0
	for {
		acc += sortWork(20000)
		acc += int(hashWork(buf))
		if acc == -1 {
			done <- acc
		}
	}
}

func main() {
	done := make(chan int)
	go work(done)
	fmt.Printf("ready %d\n", os.Getpid())
	if len(os.Args) > 1 {
		secs, err := strconv.ParseFloat(os.Args[1], 64)
		if err == nil {
			select {
			case <-done:
			case <-time.After(time.Duration(secs * float64(time.Second))):
			}
			return
		}
	}
	<-done
}
