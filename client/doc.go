// Package client is idmint's Go client: it draws IDs from one or more
// idmint servers and serves them from a local buffer.
//
//	c, err := client.New([]string{"http://id1:8080", "http://id2:8080"}, client.Options{Token: "..."})
//	id, err := c.Next(ctx, "order")
//
// # Optional parts
//
// The core speaks HTTP with the standard library alone. Two subpackages
// add what not every program needs, and bring their dependencies only to
// programs that import them:
//
//   - client/grpctransport: grpc:// and grpcs:// endpoints, through
//     Options.Dialers (any other transport can plug in the same way, as a
//     Dialer that builds a Transport).
//   - client/clientmetrics: a Prometheus collector of Stats.
//
// # Prefetch
//
// Segment keys are buffered as ranges (/v1/keys/{key}/range), snowflake,
// ticket and redis keys as batches of IDs (/v1/keys/{key}/ids). A call to
// Next takes one ID from the current range with a single atomic add. In
// the background the client keeps a prefetch distance of IDs held or
// asked for: the draw rate it measures times two refill round trips (the
// slowest of the last 64) and a failover (Options.HedgeAfter), within
// Options.MinBatch and Options.MaxPrefetch, so the distance grows with
// the draw, grows at once when callers had to wait (as CosId's safe
// distance grows with hunger), and shrinks when the draw slows. Up to
// Options.MaxRefills refill requests run at once. A call that finds the
// buffer empty waits in line: refilled IDs go to the calls in line in the
// order they came before anyone else may take them. Stats counts those
// waits and how long they took. IDs a process never hands out are gaps;
// the client never asks a server for them again, so they are never
// reissued.
//
// Monotonic keys are never prefetched, so real-time order across the
// cluster holds (a value issued after another was answered is greater): every call gets IDs from a request sent
// after it began. Concurrent calls share requests: a call joins the batch
// that is gathering, which is sent when one of Options.MaxInFlight slots
// is free (a call that arrives while they are busy waits for the next
// request), and the answer, a range, is split in the order the calls
// joined. A call whose context ends leaves; the IDs meant for it are gaps,
// never served later. The requests go to the key's leader when the
// answers have named it (Idmint-Leader) and an endpoint has said it is
// that node (Idmint-Node); otherwise, or when it fails, to any endpoint,
// which forwards. Keys of other strategies the client does not know to be
// safe to buffer are served the same way, with batches of IDs. Text keys
// (UUID family, order numbers) are refused by Next: their IDs are not
// int64.
//
// # Keys that change
//
// Every answer says the key's strategy and its generation on that node
// (Idmint-Strategy, Idmint-Key-Generation). When the strategy is not the
// one the client learned, or one endpoint's generation changes (the key
// was deleted and created again there), the client drops what it holds
// for the key and learns it again; the IDs of that answer are not
// buffered.
//
// # Failover
//
// Requests go to healthy endpoints in turn. A failure is classified:
// retryable (connection refused or reset, timeout, 5xx, 429, a malformed
// answer) fails over to the next endpoint at once; permanent (400, 401,
// 403, unknown key) is returned to the caller at once. An endpoint that
// fails Options.BreakerThreshold times in a row is left alone for a
// backoff that doubles up to Options.MaxBackoff; Retry-After (HTTP header,
// gRPC "retry-after" trailer) sets the least backoff. After the backoff
// one request probes it (half-open). A request that has no answer after
// Options.HedgeAfter is also sent to a second endpoint; the first answer
// wins, and the slow endpoint is counted as failing.
//
// # Deadlines
//
// Every call takes a context. With every endpoint down the client serves
// what it holds; once that is gone it waits for an endpoint, retrying
// with backoff, until the context's deadline (or Options.Timeout when the
// context has none) and then returns an error that wraps ErrUnavailable,
// the context's error and the last failure.
package client
