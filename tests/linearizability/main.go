// Checks a recorded client history of an etcd cluster for linearizability with porcupine.
//
// The history is JSON (written by tests/harness/history.py):
//
//	{"operations": [{"client": 0, "kind": "put", "key": "k0", "value": "c0-1",
//	                 "call": 10, "return": 20, "outcome": "ok"}, ...]}
//
// kind is "put" or "get"; for a get, value is what it observed (null: the key was absent).
// outcome is "ok", "failed" (it certainly did not take effect) or "unknown" (a put that may
// or may not have applied). Times are monotonic nanoseconds.
//
// Prints how many operations were checked and "linearizable" or "NOT linearizable"; exit
// status 0, 1, or 2 when the checker ran out of time or the input is unusable.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
)

type record struct {
	Client  int     `json:"client"`
	Kind    string  `json:"kind"`
	Key     string  `json:"key"`
	Value   *string `json:"value"`
	Call    int64   `json:"call"`
	Return  int64   `json:"return"`
	Outcome string  `json:"outcome"`
}

type input struct {
	put   bool
	key   string
	value string
}

// The value of one key (the model is partitioned by key); a get's output has the same shape.
type register struct {
	exists bool
	value  string
}

func (r register) String() string {
	if !r.exists {
		return "<absent>"
	}
	return fmt.Sprintf("%q", r.value)
}

var model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			key := op.Input.(input).key
			if _, seen := byKey[key]; !seen {
				keys = append(keys, key)
			}
			byKey[key] = append(byKey[key], op)
		}
		partitions := make([][]porcupine.Operation, 0, len(keys))
		for _, key := range keys {
			partitions = append(partitions, byKey[key])
		}
		return partitions
	},
	Init: func() interface{} { return register{} },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		op := in.(input)
		if op.put {
			return true, register{exists: true, value: op.value}
		}
		return out.(register) == state.(register), state
	},
	DescribeOperation: func(in, out interface{}) string {
		op := in.(input)
		if op.put {
			return fmt.Sprintf("put(%q, %q)", op.key, op.value)
		}
		return fmt.Sprintf("get(%q) -> %v", op.key, out.(register))
	},
	DescribeState: func(state interface{}) string { return state.(register).String() },
}

type counts struct{ puts, unknownPuts, gets, dropped int }

// operations turns records into porcupine operations. A put of unknown outcome may take effect
// at any time after its call, so it returns at the end of the history; a failed operation
// changed nothing and a failed get observed nothing, so both are dropped.
func operations(records []record) ([]porcupine.Operation, counts, error) {
	var c counts
	var end int64
	for _, r := range records {
		end = max(end, r.Call, r.Return)
	}
	ops := make([]porcupine.Operation, 0, len(records))
	for i, r := range records {
		if r.Kind != "put" && r.Kind != "get" {
			return nil, c, fmt.Errorf("operation %d: kind %q is neither put nor get", i, r.Kind)
		}
		if r.Outcome != "ok" && r.Outcome != "failed" && r.Outcome != "unknown" {
			return nil, c, fmt.Errorf("operation %d: outcome %q is not ok, failed or unknown", i, r.Outcome)
		}
		if r.Outcome == "failed" || (r.Kind == "get" && r.Outcome == "unknown") {
			c.dropped++
			continue
		}
		if r.Return < r.Call {
			return nil, c, fmt.Errorf("operation %d returns (%d) before its call (%d)", i, r.Return, r.Call)
		}
		op := porcupine.Operation{ClientId: r.Client, Call: r.Call, Return: r.Return}
		if r.Kind == "put" {
			if r.Value == nil {
				return nil, c, fmt.Errorf("operation %d: a put needs a value", i)
			}
			op.Input, op.Output = input{put: true, key: r.Key, value: *r.Value}, register{}
			c.puts++
			if r.Outcome == "unknown" {
				op.Return = end + 1
				c.unknownPuts++
			}
		} else {
			observed := register{}
			if r.Value != nil {
				observed = register{exists: true, value: *r.Value}
			}
			op.Input, op.Output = input{key: r.Key}, observed
			c.gets++
		}
		ops = append(ops, op)
	}
	return ops, c, nil
}

func main() {
	visualize := flag.String("visualize", "", "write porcupine's HTML visualization here when the history is not linearizable")
	timeout := flag.Duration("timeout", time.Minute, "give up (exit status 2) after this long")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s [-visualize out.html] [-timeout 1m] history.json\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	data, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var history struct {
		Operations []record `json:"operations"`
	}
	if err := json.Unmarshal(data, &history); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", flag.Arg(0), err)
		os.Exit(2)
	}
	ops, c, err := operations(history.Operations)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", flag.Arg(0), err)
		os.Exit(2)
	}

	start := time.Now()
	result, info := porcupine.CheckOperationsVerbose(model, ops, *timeout)
	summary := fmt.Sprintf("%d operations checked (%d puts, %d of unknown outcome; %d gets; %d failed dropped) in %.3fs",
		len(ops), c.puts, c.unknownPuts, c.gets, c.dropped, time.Since(start).Seconds())
	switch result {
	case porcupine.Ok:
		fmt.Printf("%s: linearizable\n", summary)
	case porcupine.Illegal:
		fmt.Printf("%s: NOT linearizable\n", summary)
		if *visualize != "" {
			if err := porcupine.VisualizePath(model, info, *visualize); err != nil {
				fmt.Fprintf(os.Stderr, "visualization: %v\n", err)
			} else {
				fmt.Printf("visualization: %s\n", *visualize)
			}
		}
		os.Exit(1)
	default:
		fmt.Printf("%s: UNKNOWN, the checker gave up after %s\n", summary, *timeout)
		os.Exit(2)
	}
}
