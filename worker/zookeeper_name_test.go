package worker

import (
	"encoding/json"
	"strings"
	"testing"
)

// createdSeq reads the sequence number ZooKeeper appended to a node's
// name, and refuses a name without one rather than taking worker ID 0.
func TestCreatedSeq(t *testing.T) {
	if n, err := createdSeq("/snowflake/app/forever/10.0.0.1:8080-0000000007"); err != nil || n != 7 {
		t.Errorf("createdSeq(...-0000000007) = %d, %v; want 7", n, err)
	}
	for _, p := range []string{"/snowflake/app/forever/10.0.0.1:8080-", "/snowflake/app/forever/10.0.0.1:8080", "/snowflake/app/forever/10.0.0.1:8080-00x7"} {
		if n, err := createdSeq(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("createdSeq(%q) = %d, %v; want an error naming the node", p, n, err)
		}
	}
}

// The node a new endpoint creates carries Leaf's report of that endpoint:
// its ip and port as NewZooKeeper split them.
func TestZooKeeperNodeReportsEndpoint(t *testing.T) {
	f := newZKFixture(t, "10.7.0.3:8181")
	l := acquireZK(t, f.a)
	kids, _, err := f.obs.Children(f.a.forever())
	if err != nil {
		t.Fatal(err)
	}
	var ep leafEndpoint
	for _, k := range kids {
		if _, seq, ok := parseLeafNode(k); ok && seq == l.ID() {
			data, _, err := f.obs.Get(f.a.forever() + "/" + k)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &ep); err != nil {
				t.Fatalf("node %s: %q: %v", k, data, err)
			}
		}
	}
	if ep.IP != "10.7.0.3" || ep.Port != "8181" || ep.Timestamp <= 0 {
		t.Errorf("the node of worker %d reports %+v; want ip 10.7.0.3, port 8181 and a timestamp", l.ID(), ep)
	}
}
