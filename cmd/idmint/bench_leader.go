package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	v1 "github.com/idmint/idmint/api/idmintv1"
)

// A key that one elected node issues (monotonic) is answered by that
// leader; any other node forwards to it, one round trip more. With
// several targets, bench asks each what it knows (the Idmint-Node and
// Idmint-Leader headers of a key's answer; gRPC: the same header
// metadata, lowercase) and, when one of them is the leader, sends every
// request to it, as the Go client does.

// targetInfo is what one target's answer for the key said.
type targetInfo struct {
	node, leader string
}

// leaderOf returns the target that is the key's leader as the targets
// tell, "" when none of them is known to be (no leader, an older server,
// a key without one).
func leaderOf(ctx context.Context, targets []string, key, token string) string {
	if len(targets) < 2 {
		return ""
	}
	infos := make([]targetInfo, len(targets))
	for i, t := range targets {
		infos[i] = askTarget(ctx, t, key, token)
	}
	for _, in := range infos {
		if in.leader == "" {
			continue
		}
		for j, other := range infos {
			if other.node == in.leader {
				return targets[j]
			}
		}
	}
	return ""
}

// askTarget sends one request for the key to target and reads the
// answer's node and leader. HTTP asks with HEAD, which answers a key's
// headers without issuing an ID; gRPC has no such call and asks for one
// ID.
func askTarget(ctx context.Context, target, key, token string) targetInfo {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if strings.HasPrefix(target, "grpc://") {
		cc, err := grpc.NewClient(strings.TrimPrefix(target, "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return targetInfo{}
		}
		defer cc.Close()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		var hd metadata.MD
		if _, err := v1.NewIDsClient(cc).NextIDs(ctx, &v1.NextIDsRequest{Key: key, Count: 1}, grpc.Header(&hd)); err != nil && len(hd) == 0 {
			return targetInfo{}
		}
		first := func(k string) string {
			if v := hd.Get(k); len(v) > 0 {
				return v[0]
			}
			return ""
		}
		return targetInfo{node: first("idmint-node"), leader: first("idmint-leader")}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, strings.TrimRight(target, "/")+"/v1/keys/"+url.PathEscape(key)+"/ids?count=1", nil)
	if err != nil {
		return targetInfo{}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return targetInfo{}
	}
	resp.Body.Close()
	return targetInfo{node: resp.Header.Get("Idmint-Node"), leader: resp.Header.Get("Idmint-Leader")}
}
