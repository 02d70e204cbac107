package worker

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// maxOrdinal bounds the ordinal a pod name may carry. Kubernetes
// StatefulSet ordinals are int32 (spec.ordinals.start and the replica
// count are int32; apps/v1 API reference), so nothing larger is a real
// ordinal.
const maxOrdinal = 1<<31 - 1

// NewStatefulSet returns an Assigner whose worker ID is the ordinal of a
// Kubernetes StatefulSet pod plus offset. pod is the pod's name
// ("idmint-2", ordinal 2: StatefulSet pods are named <set>-<ordinal>) or
// the bare ordinal ("2", as the downward API gives the
// apps.kubernetes.io/pod-index label). This is CosId's StatefulSet
// distributor (StatefulSetMachineIdDistributor, which reads the suffix of
// $HOSTNAME), with a time horizon.
//
// The horizon works as for NewStatic: give WithHorizonFile a path on the
// pod's own volume (the StatefulSet's volumeClaimTemplate follows the
// ordinal, so the file follows the worker ID across rescheduling), or
// WithMemoryHorizon; with neither, Acquire fails with ErrNoHorizon.
//
// What it does not protect against: two live pods with the same ordinal.
// The StatefulSet controller creates a pod's replacement only once the old
// pod object is gone, but a forced delete (kubectl delete --force
// --grace-period=0, or a node controller giving up on an unreachable node)
// removes the object while the old container may still run on its node;
// both then issue IDs under one worker ID, and the horizon file's lock
// does not help unless both mounted the very same file system and it
// honours flock across nodes. Use etcd (or ZooKeeper, or SQL) when that
// matters: their leases fence the old holder.
//
// A pod name without a trailing -N, a negative offset or an ordinal past
// int32 fails with an error wrapping ErrBadURL that names the value.
func NewStatefulSet(pod string, offset int64, opts ...Option) (Assigner, error) {
	ord, err := podOrdinal(pod)
	if err != nil {
		return nil, err
	}
	if offset < 0 || offset > maxOrdinal {
		return nil, fmt.Errorf("%w: k8s offset %d is not between 0 and %d", ErrBadURL, offset, maxOrdinal)
	}
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	src := fmt.Sprintf("k8s pod %s (ordinal %d", pod, ord)
	if offset != 0 {
		src += fmt.Sprintf(" + offset %d", offset)
	}
	return &fixed{s: s, id: ord + offset, source: src + ")"}, nil
}

// podOrdinal returns the ordinal of a StatefulSet pod name ("idmint-2")
// or of a bare ordinal ("2").
func podOrdinal(pod string) (int64, error) {
	digits := pod
	if i := strings.LastIndexByte(pod, '-'); i >= 0 {
		digits = pod[i+1:]
	}
	// Digits only: ParseInt would also take a sign ("idmint-+2").
	ok := digits != ""
	for _, r := range digits {
		ok = ok && r >= '0' && r <= '9'
	}
	n, err := strconv.ParseInt(digits, 10, 64) // out of range: err
	if !ok || err != nil || n > maxOrdinal {
		return 0, fmt.Errorf("%w: k8s pod name %q does not end in a StatefulSet ordinal (want <set>-<N> such as idmint-2, or a bare N)", ErrBadURL, pod)
	}
	return n, nil
}

// statefulSetPod returns the pod name a k8s:// URL names: the URL's host
// when given (k8s://idmint-2), else the environment variable env names
// (env=POD_ORDINAL, set from the downward API), else $HOSTNAME, which the
// container runtime sets to the pod's name, else the kernel's host name.
// Reading the environment here is Open's edge, as ip:// reads the
// interfaces: NewStatefulSet itself takes the name.
func statefulSetPod(host, env string) (string, error) {
	switch {
	case host != "":
		return host, nil
	case env != "":
		v := os.Getenv(env)
		if v == "" {
			return "", fmt.Errorf("%w: k8s url: env %q names an environment variable that is empty or unset; set it from the downward API (fieldRef metadata.name, or metadata.labels['apps.kubernetes.io/pod-index'])", ErrBadURL, env)
		}
		return v, nil
	}
	if v := os.Getenv("HOSTNAME"); v != "" {
		return v, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("worker: k8s: read the host name: %w", err)
	}
	return h, nil
}
