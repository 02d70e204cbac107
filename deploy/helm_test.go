package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/strategies"
)

// chart is the Helm chart's directory (from deploy/); its ci/ holds the
// values files the tests render it with besides the defaults.
const chart = "helm/idmint"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns the path of Helm as pinned in tools/helm/go.mod (a module
// of its own, so the main module never depends on it): `go tool -n helm`
// there builds it into the build cache when it is not there yet and
// prints the cached executable's path. Without the module cache or a
// network to fill it, or when the build does not finish before the
// test's deadline, the test skips saying so; under CI=true it fails.
// scripts/test.sh builds it before the tests, so here it is a cache hit
// (the first build takes minutes).
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		limit := 15 * time.Minute
		if d, ok := t.Deadline(); ok {
			limit = min(limit, time.Until(d)-2*time.Minute)
		}
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		c := exec.CommandContext(ctx, "go", "tool", "-n", "helm")
		c.Dir = filepath.Join("..", "tools", "helm")
		var stderr strings.Builder
		c.Stderr = &stderr
		out, err := c.Output()
		helmPath = strings.TrimSpace(string(out))
		if err == nil && helmPath == "" {
			err = errors.New("printed no path")
		}
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("did not finish in %v", limit.Round(time.Second))
			}
			helmErr = fmt.Errorf("cannot build helm (cd tools/helm && go tool -n helm): %v\n%s", err, stderr.String())
		}
	})
	if helmErr != nil {
		msg := helmErr.Error() + "\nrun the whole suite with scripts/test.sh, which builds helm first (it needs the Go module proxy once)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return helmPath
}

// runHelm runs helm with its caches and config in a temporary home, and
// returns its output and error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := helm(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, args...)
	home := t.TempDir()
	c.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if err != nil {
		err = fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), err
}

// chartValues are the values files the chart is rendered with: none (the
// defaults) and each of its ci/*-values.yaml.
func chartValues(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(chart, "ci", "*-values.yaml"))
	if len(files) == 0 {
		t.Fatalf("%s/ci has no *-values.yaml", chart)
	}
	return append([]string{""}, files...)
}

// TestHelmChart: helm lint passes, and helm template renders, with the
// default values and with every ci/ values file, manifests that pass the
// checks deploy/k8s's pass (the rendered config passes idmint serve
// --check with the pod's files, probes and terminationGracePeriodSeconds
// agree with the drain settings, ...), that validate against the
// Kubernetes schemas and yamllint, and whose config the server's own
// validation accepts.
func TestHelmChart(t *testing.T) {
	helm(t)
	for _, values := range chartValues(t) {
		name := "default"
		var vf []string
		if values != "" {
			name = strings.TrimSuffix(filepath.Base(values), "-values.yaml")
			vf = []string{"-f", values}
		}
		t.Run(name, func(t *testing.T) {
			if out, err := runHelm(t, append([]string{"lint", "--strict", chart}, vf...)...); err != nil {
				t.Fatal(err)
			} else {
				t.Logf("%s", out)
			}
			out, err := runHelm(t, append([]string{"template", "idmint", chart, "--namespace", "idmint"}, vf...)...)
			if err != nil {
				t.Fatal(err)
			}
			objs := parseK8s(t, "helm template "+name, []byte(out))
			cfg := checkKubernetes(t, objs)
			if cfg != nil {
				reg := server.NewRegistry()
				if err := strategies.Register(reg); err != nil {
					t.Fatal(err)
				}
				if err := cfg.Validate(reg); err != nil {
					t.Errorf("the rendered config: %v", err)
				}
				if cfg.AdminToken == "" || cfg.MetricsToken == "" {
					t.Errorf("the rendered config has no admin token (%t) or no metrics token (%t) from its files", cfg.AdminToken != "", cfg.MetricsToken != "")
				}
				// ci/region-values.yaml: region eu-west, 1 of 2, its
				// registry's password a mounted file (checked above with
				// every password_file); the other values: no region.
				// (checkKubernetes moved the secret files to a temporary
				// folder.)
				got, want := cfg.Region, server.RegionConfig{}
				if name == "region" {
					want = server.RegionConfig{Name: "eu-west", Index: 1, Count: 2,
						Registry: "postgres://idmint@registry.global.example:5432/idmint_regions?password_file=/region-registry"}
					if dir, file := filepath.Split(strings.TrimPrefix(got.Registry, "postgres://idmint@registry.global.example:5432/idmint_regions?password_file=")); dir != "" {
						got.Registry = strings.TrimSuffix(got.Registry, dir+file) + "/" + file
					}
				}
				if got != want {
					t.Errorf("the rendered config's region: %+v, want %+v", cfg.Region, want)
				}
			}
			checkChart(t, objs, values)
			t.Run("schema", func(t *testing.T) { validateSchema(t, objs) })
			t.Run("yamllint", func(t *testing.T) {
				yl := tool(t, "yamllint")
				f := filepath.Join(t.TempDir(), name+".yaml")
				if err := os.WriteFile(f, []byte(out), 0o600); err != nil {
					t.Fatal(err)
				}
				// deploy/'s yamllint settings, except that a sequence in a
				// mapping may sit at the mapping's indentation: Helm's toYaml
				// (sigs.k8s.io/yaml) writes values' lists that way.
				conf := filepath.Join(t.TempDir(), "yamllint.yaml")
				abs, err := filepath.Abs("validators/yamllint.yaml")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(conf, []byte("extends: "+abs+"\nrules:\n  indentation:\n    indent-sequences: whatever\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				runTool(t, "", nil, yl, "-s", "-c", conf, f)
			})
		})
	}
}

// secretPathRE finds the files a config names for its secrets: the
// *_token_file fields and the URLs' password_file parameters.
var secretPathRE = regexp.MustCompile(`(?:_token_file: |password_file=)([^&\s"']+)`)

// chartObjects are the parts of the rendered objects checkChart reads.
type (
	chartPod struct {
		Spec struct {
			Template struct {
				Spec struct {
					SecurityContext struct {
						RunAsNonRoot *bool `yaml:"runAsNonRoot"`
					} `yaml:"securityContext"`
					Containers []struct {
						Env []struct {
							Name      string
							ValueFrom map[string]any `yaml:"valueFrom"`
						}
						SecurityContext struct {
							ReadOnlyRootFilesystem *bool `yaml:"readOnlyRootFilesystem"`
							RunAsNonRoot           *bool `yaml:"runAsNonRoot"`
						} `yaml:"securityContext"`
						Resources struct {
							Requests map[string]string
							Limits   map[string]string
						}
						VolumeMounts []struct {
							Name      string
							MountPath string `yaml:"mountPath"`
						} `yaml:"volumeMounts"`
					}
					Volumes []struct {
						Name      string
						Projected *struct {
							Sources []struct {
								Secret *k8sSecretSource
							}
						}
					}
				}
			}
		}
	}
	chartService struct {
		Spec struct {
			ClusterIP string `yaml:"clusterIP"`
			Ports     []struct{ Name string }
		}
	}
	chartPolicy struct {
		Spec struct {
			PolicyTypes []string `yaml:"policyTypes"`
			Ingress     []struct {
				Ports []struct{ Port yaml.Node }
			}
			Egress []map[string]any
		}
	}
	chartMonitor struct {
		Spec struct {
			Endpoints []struct {
				Port          string
				Path          string
				Authorization struct {
					Credentials struct{ Name, Key string }
				}
				BearerTokenSecret *struct{ Name, Key string } `yaml:"bearerTokenSecret"`
			}
		}
	}
	// secretRef is a Secret's key.
	secretRef struct{ name, key string }
)

// checkChart checks what the chart adds to deploy/k8s: tokens only as
// files, the scrape-only token (never the admin token) for the
// ServiceMonitor, a Service for IDs and one for the admin port, a
// NetworkPolicy limiting ingress and egress (DNS, and every egress rule
// the values give), a non-root pod with a read-only root file system
// and resources.
func checkChart(t *testing.T, objs []k8sObject, valuesFile string) {
	t.Helper()
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
	var values struct {
		NetworkPolicy struct {
			Egress []map[string]any
		} `yaml:"networkPolicy"`
		ServiceMonitor struct{ Enabled bool } `yaml:"serviceMonitor"`
	}
	if valuesFile != "" {
		readYAML(t, valuesFile, &values)
	}
	files := map[string]secretRef{} // mounted file name -> its Secret's key
	mounted := map[string]bool{}    // secret files' paths in the pod
	var named []string              // secret files the config names
	var monitors []chartMonitor
	idsSvc, adminSvc := 0, 0
	for _, o := range objs {
		switch o.Kind {
		case "StatefulSet":
			var p chartPod
			decode(o, &p)
			ps := p.Spec.Template.Spec
			if ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
				t.Error("StatefulSet: pod securityContext.runAsNonRoot is not true")
			}
			for _, c := range ps.Containers {
				if c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
					t.Error("StatefulSet: container securityContext.readOnlyRootFilesystem is not true")
				}
				if len(c.Resources.Requests) == 0 || c.Resources.Limits["memory"] == "" {
					t.Errorf("StatefulSet: resources %+v, want requests and a memory limit", c.Resources)
				}
				for _, e := range c.Env {
					if _, ok := e.ValueFrom["secretKeyRef"]; ok {
						t.Errorf("StatefulSet: env %s comes from a Secret; tokens and passwords go in files (the *_file fields)", e.Name)
					}
				}
			}
			mounts := map[string]string{}
			for _, c := range ps.Containers {
				for _, m := range c.VolumeMounts {
					mounts[m.Name] = m.MountPath
				}
			}
			for _, v := range ps.Volumes {
				if v.Projected == nil {
					continue
				}
				for _, s := range v.Projected.Sources {
					if s.Secret == nil {
						continue
					}
					for _, it := range s.Secret.Items {
						files[it.Path] = secretRef{s.Secret.Name, it.Key}
						mounted[filepath.Join(mounts[v.Name], it.Path)] = true
					}
				}
			}
		case "ConfigMap":
			var cm struct{ Data map[string]string }
			decode(o, &cm)
			for _, d := range cm.Data {
				for _, m := range secretPathRE.FindAllStringSubmatch(d, -1) {
					named = append(named, m[1])
				}
			}
		case "Service":
			var s chartService
			decode(o, &s)
			var names []string
			for _, p := range s.Spec.Ports {
				names = append(names, p.Name)
			}
			switch {
			case s.Spec.ClusterIP == "None":
			case slices.Contains(names, "admin"):
				adminSvc++
				if len(names) != 1 {
					t.Errorf("Service %s: ports %v; the admin Service serves the admin port only", o.Metadata.Name, names)
				}
			case slices.Contains(names, "http") && slices.Contains(names, "grpc"):
				idsSvc++
			default:
				t.Errorf("Service %s: ports %v", o.Metadata.Name, names)
			}
		case "NetworkPolicy":
			var np chartPolicy
			decode(o, &np)
			for _, want := range values.NetworkPolicy.Egress {
				if !slices.ContainsFunc(np.Spec.Egress, func(e map[string]any) bool { return reflect.DeepEqual(e, want) }) {
					t.Errorf("NetworkPolicy %s: the values' egress rule %v is not in it", o.Metadata.Name, want)
				}
			}
			for _, in := range np.Spec.Ingress {
				if len(in.Ports) == 0 {
					t.Errorf("NetworkPolicy %s: an ingress rule opens every port", o.Metadata.Name)
				}
			}
		case "ServiceMonitor":
			var m chartMonitor
			decode(o, &m)
			monitors = append(monitors, m)
		}
	}
	// Every token and password file the config names is one the pod
	// mounts (serve --check reads the token files, but a password file
	// only when it connects).
	if len(named) < 2 {
		t.Errorf("the config names secret files %v, want admin_token_file and metrics_token_file at least", named)
	}
	for _, p := range named {
		if !mounted[p] {
			t.Errorf("the config names %s, which the pod does not mount (it mounts %v)", p, mounted)
		}
	}
	if idsSvc != 1 || adminSvc != 1 {
		t.Errorf("%d Service(s) for IDs and %d for the admin port, want one each", idsSvc, adminSvc)
	}
	admin, metrics := files["admin-token"], files["metrics-token"]
	if admin.name == "" || metrics.name == "" {
		t.Fatalf("the pod mounts no admin-token (%v) or metrics-token (%v) file", admin, metrics)
	}
	if admin == metrics {
		t.Errorf("the admin token and the metrics token are one Secret key %v", admin)
	}
	if values.ServiceMonitor.Enabled != (len(monitors) == 1) {
		t.Errorf("serviceMonitor.enabled %t, but %d ServiceMonitor(s) rendered", values.ServiceMonitor.Enabled, len(monitors))
	}
	for _, m := range monitors {
		for _, ep := range m.Spec.Endpoints {
			got := secretRef{ep.Authorization.Credentials.Name, ep.Authorization.Credentials.Key}
			if ep.BearerTokenSecret != nil {
				got = secretRef{ep.BearerTokenSecret.Name, ep.BearerTokenSecret.Key}
			}
			if got != metrics || got == admin {
				t.Errorf("ServiceMonitor scrapes with Secret key %v, want the metrics token's %v (never the admin token's %v)", got, metrics, admin)
			}
			if ep.Port != "admin" || ep.Path != "/metrics" {
				t.Errorf("ServiceMonitor scrapes port %q path %q, want admin /metrics", ep.Port, ep.Path)
			}
		}
	}
}

// TestHelmChartRefuses: values the pods could not run with fail to
// render, naming the value: a coordinator, store or witness without an
// egress rule to reach it, a readiness probe slower than the drain, a
// config field the chart sets itself, and (values.schema.json) a misspelt
// or mistyped value.
func TestHelmChartRefuses(t *testing.T) {
	helm(t)
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"workerIds.mode=coordinator", "coordinator.url=etcd://etcd:2379/idmint"}, "networkPolicy.egress"},
		{[]string{"stores.default.url=postgres://idmint@db:5432/idmint"}, "networkPolicy.egress"},
		{[]string{"witness.url=etcd://etcd:2379/idmint-witness"}, "networkPolicy.egress"},
		{[]string{"stores.default.url=postgres://idmint@db:5432/idmint", "stores.default.password=x", "stores.default.existingSecret=s", "networkPolicy.enabled=false"}, "not both"},
		{[]string{"workerIds.mode=coordinator"}, "coordinator.url"},
		{[]string{"workerIds.mode=random"}, "/workerIds/mode"}, // values.schema.json
		{[]string{"replica=3"}, "'replica' not allowed"},       // a misspelt value is refused, not ignored
		{[]string{"metricsToken.value=short"}, "/metricsToken/value"},
		{[]string{"probes.readiness.periodSeconds=5"}, "drain.drainPeriodSeconds"},
		{[]string{"config.admin_token=0123456789abcdef"}, "config.admin_token"},
		{[]string{"config.region.name=east"}, "config.region"},
		{[]string{"region.name=east", "region.count=2", "region.index=2"}, "region.index 2: must be below region.count 2"},
		{[]string{"region.count=2"}, "without region.name"},
		{[]string{"region.name=East"}, "/region/name"},
		{[]string{"region.name=east", "region.registry.url=etcd://registry:2379/regions"}, "networkPolicy.egress"},
	} {
		args := []string{"template", "idmint", chart}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		out, err := runHelm(t, args...)
		if err == nil {
			t.Errorf("helm template --set %v rendered, want a refusal naming %s:\n%.300s", tc.set, tc.want, out)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template --set %v: %v, want it to name %s", tc.set, err, tc.want)
		}
	}
}
