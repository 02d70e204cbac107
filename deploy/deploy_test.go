// Package deploy holds idmint's deployment files (systemd, Docker, Compose,
// Kubernetes, the .deb/.rpm packaging) and the tests that keep them true
// to the code: every flag, environment variable, port and probe path they
// use exists, every config they mount passes `idmint serve --check` with
// the environment they give it, the validators found on the machine accept
// them, and the release packages install, run and uninstall
// (release_test.go).
package deploy

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/admin"
	"github.com/idmint/idmint/server/dashboard"
	"github.com/idmint/idmint/server/grpcapi"
	"github.com/idmint/idmint/server/leaf"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/worker"
)

// dummyToken stands in for every secret a deployment takes from outside
// (Kubernetes Secret, compose ${VAR:?}, systemd EnvironmentFile).
const dummyToken = "test-admin-token-0123456789"

// samplePod stands in for the downward API's metadata.name.
const samplePod = "idmint-0"

// run is one way a deployment starts `idmint`: its arguments, environment,
// files mounted into it, persistent directories, ports and probes.
type run struct {
	name     string
	args     []string          // after the binary: serve ...
	env      map[string]string // the process environment
	files    map[string]string // path inside → file on this machine
	dirs     map[string]string // directory inside → directory here (each of its files mounted)
	persist  []string          // directories kept across restarts
	ports    []int             // ports the deployment sends traffic to
	probes   map[string]int    // probe path → port
	multiple bool              // more than one node runs this
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// dockerTestCommit is the COMMIT build argument the test passes to the
// Dockerfile's go build.
const dockerTestCommit = "0123456789abcdef0123456789abcdef01234567"

// idmint builds the binary with the Dockerfile's own go build command and
// returns its path.
func idmint(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idmint-deploy-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "idmint")
		cmd := dockerBuildCommand(t)
		cmd = strings.Replace(cmd, "-o /out/idmint", "-o "+binPath, 1)
		c := exec.Command("sh", "-c", cmd)
		c.Dir = ".."
		c.Env = append(os.Environ(), "VERSION=deploy-test", "COMMIT="+dockerTestCommit, "COMMIT_TIME=2026-01-02T03:04:05Z")
		if out, err := c.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("%s: %v\n%s", cmd, err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// instruction is one Dockerfile instruction with its continuation lines
// joined.
type instruction struct {
	cmd, args string
	line      int
}

func dockerfile(t *testing.T) [][]instruction {
	t.Helper()
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages [][]instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args), start}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

func dockerBuildCommand(t *testing.T) string {
	for _, st := range dockerfile(t) {
		for _, in := range st {
			if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
				return in.args
			}
		}
	}
	t.Fatal("Dockerfile: no RUN with go build")
	return ""
}

// dockerImage is what the final stage of the Dockerfile sets.
type dockerImage struct {
	entrypoint, cmd []string
	env             map[string]string
	volumes         []string
	expose          []int
	user            string
}

func image(t *testing.T) dockerImage {
	t.Helper()
	stages := dockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s), want a multi-stage build", len(stages))
	}
	img := dockerImage{env: map[string]string{}}
	for _, in := range stages[len(stages)-1] {
		switch in.cmd {
		case "ENTRYPOINT", "CMD", "VOLUME":
			var v []string
			if err := json.Unmarshal([]byte(in.args), &v); err != nil {
				t.Fatalf("Dockerfile line %d: %s must be a JSON array (exec form): %v", in.line, in.cmd, err)
			}
			switch in.cmd {
			case "ENTRYPOINT":
				img.entrypoint = v
			case "CMD":
				img.cmd = v
			default:
				img.volumes = append(img.volumes, v...)
			}
		case "ENV":
			for _, kv := range strings.Fields(in.args) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile line %d: ENV %q is not KEY=VALUE", in.line, kv)
				}
				img.env[k] = v
			}
		case "EXPOSE":
			for _, p := range strings.Fields(in.args) {
				n, err := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
				if err != nil {
					t.Fatalf("Dockerfile line %d: EXPOSE %q", in.line, p)
				}
				img.expose = append(img.expose, n)
			}
		case "USER":
			img.user = in.args
		}
	}
	return img
}

// TestDockerfile: a multi-stage build of a static binary, run as a
// non-root user.
func TestDockerfile(t *testing.T) {
	img := image(t)
	build := dockerBuildCommand(t)
	if !strings.Contains(build, "CGO_ENABLED=0") {
		t.Errorf("Dockerfile go build %q does not set CGO_ENABLED=0", build)
	}
	f, err := elf.Open(idmint(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the Dockerfile's build is dynamically linked (it has an ELF interpreter); the final stage has no libc")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the Dockerfile's build needs shared libraries %v", libs)
	}
	// The image says which build it is: the build arguments reach
	// idmint version (and so idmint_build_info).
	if out, err := osexec.Command(idmint(t), "version").CombinedOutput(); err != nil || !strings.Contains(string(out), dockerTestCommit) || !strings.Contains(string(out), "2026-01-02T03:04:05Z") || !strings.Contains(string(out), "deploy-test") {
		t.Errorf("the Dockerfile's build: idmint version printed %q (%v), want version deploy-test, commit %s and its time", out, err, dockerTestCommit)
	}
	uid, _, _ := strings.Cut(img.user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("Dockerfile USER %q: want a numeric non-root user (Kubernetes runAsNonRoot can check only a number)", img.user)
	}
	if len(img.entrypoint) == 0 || img.entrypoint[0] != "/usr/local/bin/idmint" {
		t.Errorf("Dockerfile ENTRYPOINT %q, want /usr/local/bin/idmint", img.entrypoint)
	}
	checkRun(t, dockerRun(img))
}

// dockerRun is `docker run` of the image as the Dockerfile's header says:
// IDMINT_ADMIN_TOKEN given, a volume on the data directory.
func dockerRun(img dockerImage) run {
	env := map[string]string{"IDMINT_ADMIN_TOKEN": dummyToken}
	for k, v := range img.env {
		env[k] = v
	}
	return run{name: "Dockerfile", args: append(append([]string(nil), img.entrypoint[1:]...), img.cmd...),
		env: env, persist: img.volumes, ports: img.expose}
}

// TestSystemd: the unit is hardened as asked, and its ExecStart, config and
// environment file fit the binary.
func TestSystemd(t *testing.T) {
	u := parseUnit(t, "systemd/idmint.service")
	for _, want := range []struct{ key, val string }{
		{"ProtectSystem", "strict"}, {"NoNewPrivileges", "yes"}, {"StateDirectory", "idmint"},
	} {
		if !slices.Contains(u[want.key], want.val) {
			t.Errorf("idmint.service: %s=%v, want %s", want.key, u[want.key], want.val)
		}
	}
	if !slices.Contains(u["DynamicUser"], "yes") && len(u["User"]) == 0 {
		t.Error("idmint.service: neither DynamicUser=yes nor User=")
	}
	exec := strings.Fields(u["ExecStart"][0])
	if exec[0] != "/usr/local/bin/idmint" {
		t.Errorf("ExecStart %q", exec[0])
	}
	env, example := map[string]string{}, map[string]string{}
	for _, f := range u["EnvironmentFile"] {
		// The file is the operator's; its example lists what goes in it.
		for k, v := range readEnvFile(t, "systemd/"+filepath.Base(strings.TrimPrefix(f, "-"))+".example") {
			example[k] = v
			env[k] = dummyToken // the example holds placeholders only
			if k == "ORDERNUM_KEYS" {
				env[k] = "1:" + strings.Repeat("5a", 32) // a key ring in the form the example asks for
			}
		}
	}
	// The example's admin token is a placeholder that serve --check refuses,
	// naming the field; an operator's own token then passes.
	if tok := example["IDMINT_ADMIN_TOKEN"]; tok != "" {
		c := osexec.Command(idmint(t), "serve", "--check")
		c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "IDMINT_ADMIN_TOKEN=" + tok, "IDMINT_DATA_DIR=" + t.TempDir()}
		out, err := c.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "admin_token") {
			t.Errorf("idmint.env.example's admin token %q: serve --check exit %v, want a refusal naming admin_token:\n%s", tok, err, out)
		}
		env["IDMINT_ADMIN_TOKEN"] = "3f9c1e7a52b84d06a1e2c9d7b4f08a6e"
	}
	r := run{name: "systemd", args: exec[1:], env: env, dirs: map[string]string{}}
	for _, d := range u["StateDirectory"] {
		r.persist = append(r.persist, "/var/lib/"+d)
	}
	for _, d := range u["ConfigurationDirectory"] {
		r.dirs["/etc/"+d] = "systemd"
	}
	if cfg := checkRun(t, r); cfg != nil {
		if len(u["TimeoutStopSec"]) != 1 {
			t.Fatalf("idmint.service: TimeoutStopSec=%v, want one value", u["TimeoutStopSec"])
		}
		v := u["TimeoutStopSec"][0]
		if _, err := strconv.Atoi(v); err == nil {
			v += "s" // systemd reads a bare number as seconds
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("idmint.service: TimeoutStopSec=%s: %v", u["TimeoutStopSec"][0], err)
		}
		checkStopGrace(t, "idmint.service TimeoutStopSec", d, cfg)
	}
}

// checkStopGrace checks that what a deployment gives a node between its
// stop signal and the kill covers the drain period (/readyz 503 while
// requests are still served), shutdown_timeout for in-flight requests,
// and 5 s more to release the lease; and that the deployment drains.
func checkStopGrace(t *testing.T, where string, grace time.Duration, cfg *server.Config) {
	t.Helper()
	if cfg.Drain() <= 0 {
		t.Errorf("%s: drain_period is %v: a rolling restart then refuses clients (the default is %v)", where, cfg.Drain(), server.DefaultDrainPeriod)
	}
	need := cfg.Drain() + time.Duration(cfg.ShutdownTimeout) + 5*time.Second
	if grace < need {
		t.Errorf("%s is %v, want at least drain_period %v + shutdown_timeout %v + 5 s = %v, or the node is killed before it finishes", where, grace, cfg.Drain(), time.Duration(cfg.ShutdownTimeout), need)
	}
}

func parseUnit(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not Key=Value", path, line)
		}
		u[k] = append(u[k], v)
	}
	return u
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the unit's EnvironmentFile needs an example beside it: %v", err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, line)
		}
		env[k] = v
	}
	return env
}

// TestCompose: three idmint nodes on one etcd and one PostgreSQL, each with
// its own data volume and host port, every one passing the checks.
func TestCompose(t *testing.T) {
	var c struct {
		Services map[string]struct {
			Image       string
			Command     []string
			Environment map[string]string
			Ports       []string
			Volumes     []string
			StopGrace   string `yaml:"stop_grace_period"`
		}
		Volumes map[string]any
	}
	readYAML(t, "compose/compose.yaml", &c)
	img := image(t)
	var nodes []string
	seenVol, seenPort := map[string]string{}, map[string]string{}
	for name, s := range c.Services {
		if s.Image != "idmint:local" {
			continue
		}
		nodes = append(nodes, name)
		env := map[string]string{}
		for k, v := range img.env {
			env[k] = v
		}
		for k, v := range s.Environment {
			env[k] = interpolate(t, v, map[string]string{"IDMINT_ADMIN_TOKEN": dummyToken})
		}
		args := img.cmd
		if s.Command != nil {
			args = s.Command
		}
		r := run{name: "compose " + name, args: append(append([]string(nil), img.entrypoint[1:]...), args...),
			env: env, files: map[string]string{}, multiple: true}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Fatalf("compose %s: volume %q", name, v)
			}
			if strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/") {
				r.files[parts[1]] = filepath.Join("compose", parts[0])
				continue
			}
			if _, ok := c.Volumes[parts[0]]; !ok {
				t.Errorf("compose %s: volume %q is not declared under volumes:", name, parts[0])
			}
			if other, ok := seenVol[parts[0]]; ok {
				t.Errorf("compose %s and %s share volume %q: two nodes on one data directory", name, other, parts[0])
			}
			seenVol[parts[0]] = name
			r.persist = append(r.persist, parts[1])
		}
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			n, err := strconv.Atoi(parts[len(parts)-1])
			if err != nil {
				t.Fatalf("compose %s: port %q", name, p)
			}
			host := strings.Join(parts[:len(parts)-1], ":")
			if other, ok := seenPort[host]; ok {
				t.Errorf("compose %s and %s both publish %s", name, other, host)
			}
			seenPort[host] = name
			r.ports = append(r.ports, n)
		}
		cfg := checkRun(t, r)
		if cfg == nil {
			continue
		}
		grace := 10 * time.Second // compose's default
		if s.StopGrace != "" {
			var err error
			if grace, err = time.ParseDuration(s.StopGrace); err != nil {
				t.Fatalf("compose %s: stop_grace_period %q: %v", name, s.StopGrace, err)
			}
		}
		checkStopGrace(t, "compose "+name+" stop_grace_period", grace, cfg)
		// The coordinator and the stores must be the compose services.
		for what, u := range map[string]string{"coordinator": cfg.Coordinator, "default store": cfg.Stores[server.DefaultStore]} {
			host := urlHost(u)
			if _, ok := c.Services[host]; !ok {
				t.Errorf("compose %s: %s %s names host %q, which is no service of the file", name, what, u, host)
			}
		}
	}
	if len(nodes) != 3 {
		t.Errorf("compose has %d idmint node(s) %v, want 3", len(nodes), nodes)
	}
	for _, s := range []string{"etcd", "postgres"} {
		if _, ok := c.Services[s]; !ok {
			t.Errorf("compose has no %s service", s)
		}
	}
}

func urlHost(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	rest, _, _ = strings.Cut(rest, "/")
	if h, _, err := net.SplitHostPort(rest); err == nil {
		return h
	}
	return rest
}

var interpRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate expands compose's ${VAR}, ${VAR:-default} and ${VAR:?error}
// with the variables in vars.
func interpolate(t *testing.T, s string, vars map[string]string) string {
	return interpRE.ReplaceAllStringFunc(s, func(m string) string {
		p := interpRE.FindStringSubmatch(m)
		v, ok := vars[p[1]]
		switch {
		case ok && v != "":
			return v
		case strings.HasSuffix(p[2], "-"):
			return p[3]
		case strings.HasSuffix(p[2], "?"):
			t.Errorf("compose: ${%s} is required (%s); the test gives no value for it", p[1], p[3])
		}
		return ""
	})
}

type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string
	Metadata   struct{ Name string }
	raw        map[string]any
}

func k8sObjects(t *testing.T) []k8sObject {
	t.Helper()
	b, err := os.ReadFile("k8s/idmint.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return parseK8s(t, "k8s/idmint.yaml", b)
}

// parseK8s reads the objects of a multi-document manifest (empty
// documents, as helm template leaves between its sources, skipped).
func parseK8s(t *testing.T, where string, b []byte) []k8sObject {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []k8sObject
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
			continue
		}
		var o k8sObject
		if err := n.Decode(&o); err != nil {
			t.Fatal(err)
		}
		if err := n.Decode(&o.raw); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// The parts of the manifests the test reads (yaml.v3 into these structs).
type (
	k8sPort struct {
		Name          string
		ContainerPort int `yaml:"containerPort"`
	}
	k8sProbe struct {
		HTTPGet *struct {
			Path string
			Port yaml.Node
		} `yaml:"httpGet"`
		PeriodSeconds    int `yaml:"periodSeconds"`
		FailureThreshold int `yaml:"failureThreshold"`
	}
	k8sContainer struct {
		Name    string
		Image   string
		Command []string
		Args    []string
		Env     []struct {
			Name      string
			Value     string
			ValueFrom *struct {
				FieldRef *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
				SecretKeyRef    *struct{ Name, Key string } `yaml:"secretKeyRef"`
				ConfigMapKeyRef *struct{ Name, Key string } `yaml:"configMapKeyRef"`
			} `yaml:"valueFrom"`
		}
		Ports          []k8sPort
		StartupProbe   *k8sProbe `yaml:"startupProbe"`
		LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
		ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
		VolumeMounts   []struct {
			Name      string
			MountPath string `yaml:"mountPath"`
			SubPath   string `yaml:"subPath"`
		} `yaml:"volumeMounts"`
	}
	k8sSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	// k8sSecretSource is a secret volume's (secretName) or a projected
	// volume's secret source (name).
	k8sSecretSource struct {
		Name       string
		SecretName string `yaml:"secretName"`
		Items      []struct{ Key, Path string }
	}
)

// TestKubernetes: StatefulSet, headless Service, PodDisruptionBudget,
// probes on /healthz and /readyz, a PVC for the data directory; the
// config in the ConfigMap passes --check with the pod's environment.
func TestKubernetes(t *testing.T) {
	checkKubernetes(t, k8sObjects(t))
}

// secretContent is what the test mounts for a Secret's key at path: a
// distinct token per file (the metrics token may not be the admin token).
func secretContent(path string) string {
	return "test-secret-" + filepath.Base(path) + "-0123456789"
}

// checkKubernetes checks one set of manifests (deploy/k8s's, or what the
// Helm chart renders) and returns the configuration its pods run with
// (nil when it could not be loaded).
func checkKubernetes(t *testing.T, objs []k8sObject) *server.Config {
	t.Helper()
	byKind := map[string][]k8sObject{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	decode := func(o k8sObject, v any) {
		t.Helper()
		b, err := yaml.Marshal(o.raw)
		if err == nil {
			err = yaml.Unmarshal(b, v)
		}
		if err != nil {
			t.Fatalf("%s/%s: %v", o.Kind, o.Metadata.Name, err)
		}
	}
	if len(byKind["StatefulSet"]) != 1 {
		t.Fatalf("want one StatefulSet, have %d", len(byKind["StatefulSet"]))
	}
	var sts struct {
		Spec struct {
			ServiceName string `yaml:"serviceName"`
			Replicas    int
			Selector    k8sSelector
			Template    struct {
				Metadata struct{ Labels map[string]string }
				Spec     struct {
					TerminationGrace *int `yaml:"terminationGracePeriodSeconds"`
					Containers       []k8sContainer
					Volumes          []struct {
						Name      string
						ConfigMap *struct {
							Name  string
							Items []struct{ Key, Path string }
						} `yaml:"configMap"`
						EmptyDir              any              `yaml:"emptyDir"`
						PersistentVolumeClaim any              `yaml:"persistentVolumeClaim"`
						Secret                *k8sSecretSource `yaml:"secret"`
						Projected             *struct {
							Sources []struct {
								Secret *k8sSecretSource
							}
						}
					}
				}
			}
			VolumeClaimTemplates []struct {
				Metadata struct{ Name string }
			} `yaml:"volumeClaimTemplates"`
		}
	}
	decode(byKind["StatefulSet"][0], &sts)
	labels := sts.Spec.Template.Metadata.Labels
	matches := func(sel map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !matches(sts.Spec.Selector.MatchLabels) {
		t.Errorf("StatefulSet selector %v does not match its pods' labels %v", sts.Spec.Selector.MatchLabels, labels)
	}
	configMaps := map[string]map[string]string{}
	for _, o := range byKind["ConfigMap"] {
		var cm struct{ Data map[string]string }
		decode(o, &cm)
		configMaps[o.Metadata.Name] = cm.Data
	}
	if len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(sts.Spec.Template.Spec.Containers))
	}
	c := sts.Spec.Template.Spec.Containers[0]
	img := image(t)
	r := run{name: "k8s StatefulSet", env: map[string]string{}, files: map[string]string{}, probes: map[string]int{}, multiple: sts.Spec.Replicas > 1}
	entry, args := img.entrypoint, img.cmd
	if c.Command != nil {
		entry, args = c.Command, nil
	}
	if c.Args != nil {
		args = c.Args
	}
	r.args = append(append([]string(nil), entry[1:]...), args...)
	for k, v := range img.env {
		r.env[k] = v
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			r.env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			r.env[e.Name] = samplePod
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.labels['apps.kubernetes.io/pod-index']":
			r.env[e.Name] = "0"
		case e.ValueFrom.SecretKeyRef != nil:
			r.env[e.Name] = secretContent(e.ValueFrom.SecretKeyRef.Key) // one value per key: the metrics token may not be the admin token
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r.env[e.Name] = configMaps[e.ValueFrom.ConfigMapKeyRef.Name][e.ValueFrom.ConfigMapKeyRef.Key]
		default:
			t.Errorf("env %s: a valueFrom the test does not know", e.Name)
		}
	}
	portByName := map[string]int{}
	for _, p := range c.Ports {
		portByName[p.Name] = p.ContainerPort
		r.ports = append(r.ports, p.ContainerPort)
	}
	pvc := map[string]bool{}
	for _, v := range sts.Spec.VolumeClaimTemplates {
		pvc[v.Metadata.Name] = true
	}
	for _, m := range c.VolumeMounts {
		if pvc[m.Name] {
			r.persist = append(r.persist, m.MountPath)
			continue
		}
		found := false
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			found = true
			var secrets []*k8sSecretSource
			if v.Secret != nil {
				secrets = append(secrets, v.Secret)
			}
			if v.Projected != nil {
				for _, src := range v.Projected.Sources {
					if src.Secret != nil {
						secrets = append(secrets, src.Secret)
					}
				}
			}
			for _, sec := range secrets {
				if len(sec.Items) == 0 {
					t.Errorf("volume %s: secret %s%s mounts all its keys; name them (items), so the files the config names are known", v.Name, sec.Name, sec.SecretName)
				}
				dir := t.TempDir()
				for _, it := range sec.Items {
					here := filepath.Join(dir, filepath.Base(it.Path))
					if err := os.WriteFile(here, []byte(secretContent(it.Path)), 0o600); err != nil {
						t.Fatal(err)
					}
					r.files[filepath.Join(m.MountPath, it.Path)] = here
				}
			}
			if v.ConfigMap == nil {
				continue
			}
			data, ok := configMaps[v.ConfigMap.Name]
			if !ok {
				t.Errorf("volume %s: no ConfigMap %q in the manifests", v.Name, v.ConfigMap.Name)
				continue
			}
			dir := t.TempDir()
			for k, content := range data {
				name := k
				for _, it := range v.ConfigMap.Items {
					if it.Key == k {
						name = it.Path
					}
				}
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				inside := filepath.Join(m.MountPath, name)
				if m.SubPath != "" {
					if m.SubPath != name {
						continue
					}
					inside = m.MountPath
				}
				r.files[inside] = filepath.Join(dir, filepath.Base(name))
			}
		}
		if !found {
			t.Errorf("volumeMount %s names no volume or volumeClaimTemplate", m.Name)
		}
	}
	probe := func(kind string, p *k8sProbe) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("container %s has no %s httpGet probe", c.Name, kind)
			return
		}
		port, err := strconv.Atoi(p.HTTPGet.Port.Value)
		if err != nil {
			var ok bool
			if port, ok = portByName[p.HTTPGet.Port.Value]; !ok {
				t.Errorf("%s probe port %q names no container port", kind, p.HTTPGet.Port.Value)
			}
		}
		r.probes[p.HTTPGet.Path] = port
	}
	probe("liveness", c.LivenessProbe)
	probe("readiness", c.ReadinessProbe)
	if c.StartupProbe != nil {
		probe("startup", c.StartupProbe)
	}
	for _, want := range []string{"/healthz", "/readyz"} {
		if _, ok := r.probes[want]; !ok {
			t.Errorf("no probe on %s", want)
		}
	}
	cfg := checkRun(t, r)
	if cfg != nil {
		grace := 30 * time.Second // Kubernetes' default
		if g := sts.Spec.Template.Spec.TerminationGrace; g != nil {
			grace = time.Duration(*g) * time.Second
		}
		checkStopGrace(t, "terminationGracePeriodSeconds", grace, cfg)
		// Load balancers polling the pod must see it not ready within the
		// drain period (Kubernetes' defaults: every 10 s, 3 failures).
		if p := c.ReadinessProbe; p != nil {
			period, fails := cmp.Or(p.PeriodSeconds, 10), cmp.Or(p.FailureThreshold, 3)
			if seen := time.Duration(period*fails) * time.Second; seen >= cfg.Drain() {
				t.Errorf("readinessProbe: periodSeconds %d x failureThreshold %d = %v, want less than drain_period %v: the pod stops accepting before the probe says it is not ready", period, fails, seen, cfg.Drain())
			}
		}
		// The data directory must be the PVC's mount: the worker's horizon
		// file lives there.
		if !strings.HasPrefix(cfg.Coordinator, "k8s://") && !strings.HasPrefix(cfg.Coordinator, "etcd://") && !strings.HasPrefix(cfg.Coordinator, "zk://") {
			t.Errorf("coordinator %s: a StatefulSet wants k8s://, etcd:// or zk://", cfg.Coordinator)
		}
	}

	// Services: one headless, the StatefulSet's serviceName; target ports
	// name container ports; selectors match the pods.
	headless := false
	for _, o := range byKind["Service"] {
		var s struct {
			Spec struct {
				ClusterIP string `yaml:"clusterIP"`
				Selector  map[string]string
				Ports     []struct {
					Port       int
					TargetPort yaml.Node `yaml:"targetPort"`
				}
			}
		}
		decode(o, &s)
		if s.Spec.ClusterIP == "None" && o.Metadata.Name == sts.Spec.ServiceName {
			headless = true
		}
		if !matches(s.Spec.Selector) {
			t.Errorf("Service %s selector %v does not match the pods", o.Metadata.Name, s.Spec.Selector)
		}
		for _, p := range s.Spec.Ports {
			tp := p.TargetPort.Value
			if tp == "" {
				tp = strconv.Itoa(p.Port)
			}
			if n, err := strconv.Atoi(tp); err == nil {
				if !slices.Contains(r.ports, n) {
					t.Errorf("Service %s targetPort %d is no container port", o.Metadata.Name, n)
				}
			} else if _, ok := portByName[tp]; !ok {
				t.Errorf("Service %s targetPort %q names no container port", o.Metadata.Name, tp)
			}
		}
	}
	if !headless {
		t.Errorf("no headless Service (clusterIP: None) named %q, the StatefulSet's serviceName", sts.Spec.ServiceName)
	}
	if len(byKind["PodDisruptionBudget"]) != 1 {
		t.Errorf("want one PodDisruptionBudget, have %d", len(byKind["PodDisruptionBudget"]))
	}
	for _, o := range byKind["PodDisruptionBudget"] {
		var p struct {
			Spec struct{ Selector k8sSelector }
		}
		decode(o, &p)
		if !matches(p.Spec.Selector.MatchLabels) {
			t.Errorf("PodDisruptionBudget %s selector does not match the pods", o.Metadata.Name)
		}
	}
	if len(pvc) == 0 {
		t.Error("the StatefulSet has no volumeClaimTemplates")
	}
	// The NetworkPolicy limits both ways: what reaches the pods, and what
	// they reach (DNS and the servers the config names), so a compromised
	// pod cannot talk to anything else.
	if len(byKind["NetworkPolicy"]) != 1 {
		t.Errorf("want one NetworkPolicy, have %d", len(byKind["NetworkPolicy"]))
	}
	for _, o := range byKind["NetworkPolicy"] {
		var np struct {
			Spec struct {
				PodSelector k8sSelector `yaml:"podSelector"`
				PolicyTypes []string    `yaml:"policyTypes"`
				Egress      []map[string]any
			}
		}
		decode(o, &np)
		if !matches(np.Spec.PodSelector.MatchLabels) {
			t.Errorf("NetworkPolicy %s selects other pods than the StatefulSet's", o.Metadata.Name)
		}
		if !slices.Contains(np.Spec.PolicyTypes, "Ingress") || !slices.Contains(np.Spec.PolicyTypes, "Egress") {
			t.Errorf("NetworkPolicy %s: policyTypes %v, want Ingress and Egress", o.Metadata.Name, np.Spec.PolicyTypes)
		}
		dns := false
		for _, e := range np.Spec.Egress {
			if to, _ := e["to"].([]any); len(to) == 0 {
				t.Errorf("NetworkPolicy %s: egress rule %v allows every destination", o.Metadata.Name, e)
			}
			if strings.Contains(fmt.Sprint(e["ports"]), "port:53") {
				dns = true
			}
		}
		if !dns {
			t.Errorf("NetworkPolicy %s: no egress rule for DNS (port 53)", o.Metadata.Name)
		}
	}
	return cfg
}

// checkRun checks one way of starting idmint against the code and returns
// the configuration it ends up with (nil when it could not be loaded).
func checkRun(t *testing.T, r run) *server.Config {
	t.Helper()
	bin := idmint(t)
	if len(r.args) == 0 || r.args[0] != "serve" {
		t.Errorf("%s: runs %q, want idmint serve", r.name, r.args)
		return nil
	}
	flags := serveFlags(t, bin)
	known := knownEnv(t, bin)
	var flagVals = map[string]string{}
	args := r.args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: argument %q is not a flag", r.name, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		isBool, ok := flags[name]
		if !ok {
			t.Errorf("%s: idmint serve has no flag --%s", r.name, name)
			continue
		}
		if !hasVal && !isBool && i+1 < len(args) {
			i++
			val = args[i]
		}
		flagVals[name] = val
	}
	for k := range r.env {
		if strings.HasPrefix(k, "IDMINT_") && !known[k] {
			t.Errorf("%s: environment variable %s is not one idmint reads", r.name, k)
		}
	}

	// The config file the run names must be one it mounts.
	path := flagVals["config"]
	if path == "" {
		path = r.env["IDMINT_CONFIG"]
	}
	hostPath := ""
	if path != "" {
		hostPath = r.files[path]
		for in, here := range r.dirs {
			if rel, err := filepath.Rel(in, path); err == nil && !strings.HasPrefix(rel, "..") {
				hostPath = filepath.Join(here, rel)
			}
		}
		if hostPath == "" {
			t.Errorf("%s: config %s is not a file the deployment mounts", r.name, path)
			return nil
		}
		abs, err := filepath.Abs(hostPath)
		if err != nil {
			t.Fatal(err)
		}
		hostPath = abs
		hostPath = mountedPaths(t, hostPath, path, r.files)
	}

	// idmint serve --check, with the run's flags and environment.
	checkArgs := []string{"serve", "--check"}
	for _, a := range args {
		checkArgs = append(checkArgs, a)
	}
	for i, a := range checkArgs {
		if a == path && i > 0 && strings.TrimLeft(checkArgs[i-1], "-") == "config" {
			checkArgs[i] = hostPath
		}
		if a == "--config="+path {
			checkArgs[i] = "--config=" + hostPath
		}
	}
	cmd := exec.Command(bin, checkArgs...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range r.env {
		if k == "IDMINT_CONFIG" && hostPath != "" {
			v = hostPath
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: idmint %s: %v\n%s", r.name, strings.Join(checkArgs, " "), err, out)
		return nil
	}

	// The configuration serve loads, for the checks below.
	cfg := &server.Config{}
	if hostPath != "" {
		f, err := os.Open(hostPath)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err = server.ParseConfig(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := cfg.Override(func(k string) string { return r.env[k] }); err != nil {
		t.Fatal(err)
	}
	for f, dst := range map[string]*string{"listen": &cfg.Listen, "grpc-listen": &cfg.GRPCListen, "admin-listen": &cfg.AdminListen, "data": &cfg.DataDir, "coordinator": &cfg.Coordinator} {
		if v, ok := flagVals[f]; ok {
			*dst = v
		}
	}
	if v, ok := flagVals["store"]; ok {
		cfg.Stores = map[string]string{server.DefaultStore: v}
	}
	cfg.SetDefaults()

	// Data directory: a persistent mount (an absolute path: the working
	// directory of a container or unit is no place for it).
	if !filepath.IsAbs(cfg.DataDir) || !slices.Contains(r.persist, filepath.Clean(cfg.DataDir)) {
		t.Errorf("%s: data directory %q is not one of its persistent mounts %v", r.name, cfg.DataDir, r.persist)
	}
	// Ports: every port the deployment sends traffic to is one idmint
	// listens on, on every interface (loopback is unreachable from
	// outside a container).
	listening := map[int]string{}
	for what, a := range map[string]string{"listen": cfg.Listen, "grpc_listen": cfg.GRPCListen, "admin_listen": cfg.AdminListen} {
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			t.Errorf("%s: %s %q", r.name, what, a)
			continue
		}
		n, _ := strconv.Atoi(port)
		if host == "" || host == "0.0.0.0" || host == "::" {
			listening[n] = what
		}
	}
	for _, p := range r.ports {
		if _, ok := listening[p]; !ok {
			t.Errorf("%s: port %d is not one idmint listens on for outside clients (%v)", r.name, p, listening)
		}
	}
	for path, port := range r.probes {
		if listening[port] != "listen" {
			t.Errorf("%s: probe %s on port %d, but the HTTP listener is %s", r.name, path, port, cfg.Listen)
		}
		if code := routeStatus(t, path); code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
			t.Errorf("%s: probe path %s answers %d", r.name, path, code)
		}
	}
	// The coordinator: more than one node needs a shared one (or the
	// StatefulSet's ordinals), and a k8s:// URL's env= variable must be
	// set; the URL must resolve to a worker ID.
	co := strings.ToLower(cfg.Coordinator)
	if r.multiple && (strings.HasPrefix(co, "file://") || strings.HasPrefix(co, "static://") || strings.HasPrefix(co, "sqlite://")) {
		t.Errorf("%s: several nodes share coordinator %s, which hands each the same worker ID", r.name, cfg.Coordinator)
	}
	if strings.HasPrefix(co, "k8s://") {
		checkK8sCoordinator(t, r, cfg.Coordinator)
	}
	return cfg
}

// mountedPaths returns the config at hostPath with every other file the
// deployment mounts (token files, store passwords) named by its path on
// this machine, written to a copy when any is named; the config itself
// (inside) is left out.
func mountedPaths(t *testing.T, hostPath, inside string, files map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(hostPath)
	if err != nil {
		t.Fatal(err)
	}
	var ins []string
	for in := range files {
		if in != inside {
			ins = append(ins, in)
		}
	}
	// Longest first: /a/b-2 before /a/b.
	sort.Slice(ins, func(i, j int) bool { return len(ins[i]) > len(ins[j]) })
	cfg := string(b)
	for _, in := range ins {
		cfg = strings.ReplaceAll(cfg, in, files[in])
	}
	if cfg == string(b) {
		return hostPath
	}
	p := filepath.Join(t.TempDir(), filepath.Base(hostPath))
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func checkK8sCoordinator(t *testing.T, r run, coord string) {
	t.Helper()
	if m := regexp.MustCompile(`[?&]env=([^&]+)`).FindStringSubmatch(coord); m != nil {
		if _, ok := r.env[m[1]]; !ok {
			t.Errorf("%s: coordinator %s reads %s, which the pod does not set", r.name, coord, m[1])
			return
		}
		t.Setenv(m[1], r.env[m[1]])
	}
	sep := "?"
	if strings.Contains(coord, "?") {
		sep = "&"
	}
	a, err := worker.Open(context.Background(), coord+sep+"horizon=memory")
	if err != nil {
		t.Errorf("%s: coordinator %s: %v", r.name, coord, err)
		return
	}
	defer a.Close()
	l, err := a.Acquire(context.Background(), 1023)
	if err != nil {
		t.Errorf("%s: coordinator %s: %v", r.name, coord, err)
		return
	}
	l.Close()
	// Pod 0's worker ID is 0, or the URL's offset.
	want := int64(0)
	if m := regexp.MustCompile(`[?&]offset=([0-9]+)`).FindStringSubmatch(coord); m != nil {
		want, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if l.ID() != want {
		t.Errorf("%s: coordinator %s gives pod %s worker ID %d, want %d", r.name, coord, samplePod, l.ID(), want)
	}
}

var (
	routesOnce sync.Once
	routes     http.Handler
	routesErr  error
)

// routeStatus is the status idmint's public handler answers a GET of path
// with (a server with one UUID key).
func routeStatus(t *testing.T, path string) int {
	t.Helper()
	routesOnce.Do(func() {
		reg := server.NewRegistry()
		if routesErr = strategies.Register(reg); routesErr != nil {
			return
		}
		cfg := &server.Config{DataDir: t.TempDir(), Keys: map[string]server.KeyConfig{"uuid": {Strategy: "uuid"}}}
		cfg.SetDefaults()
		var s *server.Server
		s, routesErr = server.New(context.Background(), server.Options{Config: cfg, Registry: reg,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Surfaces: []server.NewSurface{leaf.New, admin.New, dashboard.New, grpcapi.New}})
		if routesErr == nil {
			routes = s.Handler()
		}
	})
	if routesErr != nil {
		t.Fatal(routesErr)
	}
	w := httptest.NewRecorder()
	routes.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w.Code
}

var flagRE = regexp.MustCompile(`(?m)^\s+--?([a-z][a-z0-9-]*)( [a-z]+)?$`)

// serveFlags returns the flags `idmint serve -h` lists: name → boolean.
func serveFlags(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range flagRE.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = m[2] == ""
	}
	if len(flags) < 5 {
		t.Fatalf("idmint serve -h lists %d flags:\n%s", len(flags), out)
	}
	return flags
}

// knownEnv returns every IDMINT_ variable idmint serve reads: those its
// flags' help names, and those server.Config.Override asks for.
func knownEnv(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`env (IDMINT_[A-Z_]+)`).FindAllStringSubmatch(string(out), -1) {
		known[m[1]] = true
	}
	var c server.Config
	c.Override(func(k string) string { known[k] = true; return "" })
	return known
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestYAMLParses: every YAML file here parses (yaml.v3), whatever
// validators the machine has.
func TestYAMLParses(t *testing.T) {
	for _, f := range yamlFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var v any
			if err := dec.Decode(&v); err == io.EOF {
				break
			} else if err != nil {
				t.Errorf("%s: %v", f, err)
				break
			}
		}
	}
}

func yamlFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, g := range []string{"*/*.yaml", "*/*.yml", "helm/*/*.yaml", "helm/*/ci/*.yaml"} {
		m, _ := filepath.Glob(g)
		out = append(out, m...)
	}
	sort.Strings(out)
	if len(out) < 4 {
		t.Fatalf("found only %v", out)
	}
	return out
}

// tool returns the path of an external validator, or skips the test when
// it is missing; under CI=true a missing validator fails. scripts/test.sh
// installs them (deploy/validators/install.sh, as root); tests never
// install anything themselves.
func tool(t *testing.T, name string, path ...string) string {
	t.Helper()
	p := lookTool(name, path)
	if p == "" {
		msg := fmt.Sprintf("validator %s is not installed; run deploy/validators/install.sh (as root) to install it, or the whole suite with scripts/test.sh", name)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// lookTool returns the path of a validator: the file path names (under
// deploy/), or name on $PATH; "" when it is missing.
func lookTool(name string, path []string) string {
	p := name
	if len(path) > 0 {
		p = filepath.Join(path...)
		if _, err := os.Stat(p); err != nil {
			p = ""
		}
	} else if lp, err := exec.LookPath(name); err == nil {
		p = lp
	} else {
		p = ""
	}
	return p
}

func runTool(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestSystemdAnalyze: systemd-analyze verify accepts the unit (run on a
// copy of this machine's units with idmint at its ExecStart path, so a
// missing binary is not the complaint), and its security exposure stays
// at most 2.0 ("OK").
func TestSystemdAnalyze(t *testing.T) {
	analyzeUnit(t, tool(t, "systemd-analyze"), "systemd/idmint.service", idmint(t), "usr/local/bin/idmint")
}

// analyzeUnit runs systemd-analyze (sa) verify and security on the unit
// file, with the binary bin at binDst under the root it checks.
func analyzeUnit(t *testing.T, sa, unit, bin, binDst string) {
	t.Helper()
	units := "/usr/lib/systemd/system"
	if _, err := os.Stat(filepath.Join(units, "multi-user.target")); err != nil {
		units = "/lib/systemd/system"
	}
	root := t.TempDir()
	copyFile(t, bin, filepath.Join(root, binDst), 0o755)
	copyFile(t, unit, filepath.Join(root, "etc/systemd/system/idmint.service"), 0o644)
	if err := os.MkdirAll(filepath.Join(root, "usr/lib/systemd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("cp", "-r", units, filepath.Join(root, "usr/lib/systemd/")).Run(); err != nil {
		t.Fatalf("copy %s: %v", units, err)
	}
	out := runTool(t, "", nil, sa, "verify", "--man=no", "--root="+root, "/etc/systemd/system/idmint.service")
	if strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify %s says:\n%s", unit, out)
	}
	out = runTool(t, "", nil, sa, "security", "--offline=true", "--root="+root, "idmint.service")
	m := regexp.MustCompile(`Overall exposure level for idmint.service: ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no exposure level:\n%s", out)
	}
	if v, _ := strconv.ParseFloat(m[1], 64); v > 2.0 {
		t.Errorf("systemd-analyze security %s: exposure %s, want at most 2.0", unit, m[1])
	}
	t.Logf("systemd-analyze security %s: exposure %s", unit, m[1])
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(to), 0o755)
	}
	if err == nil {
		err = os.WriteFile(to, b, mode)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestYamllint runs yamllint over every YAML file.
func TestYamllint(t *testing.T) {
	yl := tool(t, "yamllint")
	runTool(t, "", nil, yl, append([]string{"-s", "-c", "validators/yamllint.yaml"}, yamlFiles(t)...)...)
}

// TestComposeConfig: docker-compose config validates the compose file
// against the Compose schema (docker-compose 1.29, Debian's package).
func TestComposeConfig(t *testing.T) {
	dc := tool(t, "docker-compose")
	runTool(t, "compose", []string{"IDMINT_ADMIN_TOKEN=" + dummyToken}, dc, "-f", "compose.yaml", "config", "-q")
}

// TestDockerfileLint runs dockerfile-utils' linter (npm).
func TestDockerfileLint(t *testing.T) {
	du := tool(t, "dockerfile-utils", "validators", "node_modules", ".bin", "dockerfile-utils")
	if out := runTool(t, "", nil, du, "lint", "Dockerfile"); strings.TrimSpace(out) != "" {
		t.Errorf("dockerfile-utils lint:\n%s", out)
	}
}

// TestKubernetesSchema validates every manifest object against the
// Kubernetes OpenAPI schema as npm's kubernetes-models ships it.
func TestKubernetesSchema(t *testing.T) {
	validateSchema(t, k8sObjects(t))
}

// validateSchema runs validate-k8s.mjs over objs: kubernetes-models'
// schemas, and @kubernetes-models/prometheus-operator's for a
// ServiceMonitor.
func validateSchema(t *testing.T, k8s []k8sObject) {
	t.Helper()
	node := tool(t, "node")
	tool(t, "kubernetes-models", "validators", "node_modules", "kubernetes-models", "package.json")
	tool(t, "@kubernetes-models/prometheus-operator", "validators", "node_modules", "@kubernetes-models", "prometheus-operator", "package.json")
	var objs []map[string]any
	for _, o := range k8s {
		objs = append(objs, o.raw)
	}
	b, err := json.Marshal(objs)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "manifests.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runTool(t, "validators", nil, node, "validate-k8s.mjs", f)
	t.Logf("kubernetes-models:\n%s", out)
}
