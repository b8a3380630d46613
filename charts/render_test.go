package charts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The release every test renders.
const (
	chartDir    = "sovereign"
	releaseName = "sov"
	namespace   = "agents"
	fullname    = "sov-sovereign"
)

// kubeVersion is the cluster version rendering and linting assume (the
// chart's kubeVersion is >=1.25; lint's deprecation rule checks against it).
var kubeVersion = &chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}

// scheme knows exactly the kinds the chart may render: anything else fails
// to decode.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		networkingv1.AddToScheme, autoscalingv2.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// strict decodes YAML into typed objects and fails on unknown or duplicate
// fields: the serializer kubectl and the API server use, in strict mode.
var strict = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// object is one rendered Kubernetes object.
type object struct {
	gvk schema.GroupVersionKind
	obj runtime.Object
}

func (o object) name() string { return o.obj.(metav1.Object).GetName() }

// manifest is a rendered release.
type manifest struct {
	objects []object
	notes   string
	values  chartutil.Values
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

// readValues reads a values file (relative to the charts directory) and
// lays overrides on top.
func readValues(t *testing.T, file string, overrides map[string]any) map[string]any {
	t.Helper()
	vals := map[string]any{}
	if file != "" {
		v, err := chartutil.ReadValuesFile(file)
		if err != nil {
			t.Fatalf("read %s: %v", file, err)
		}
		vals = v.AsMap()
	}
	return chartutil.CoalesceTables(overrides, vals)
}

// render renders the chart as `helm template` does (schema validation
// included) and returns the values it used, or the first error.
func render(c *chart.Chart, vals map[string]any) (*manifest, error) {
	opts := chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, IsInstall: true, Revision: 1}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVersion
	top, err := chartutil.ToRenderValues(c, vals, opts, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(c, top)
	if err != nil {
		return nil, err
	}
	m := &manifest{values: top["Values"].(chartutil.Values)}
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		content := files[name]
		if strings.HasSuffix(name, "NOTES.txt") {
			m.notes = content
			continue
		}
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(content)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if isEmptyYAML(doc) {
				continue
			}
			obj, gvk, err := strict.Decode(doc, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: strict decode: %w\n%s", name, err, doc)
			}
			m.objects = append(m.objects, object{gvk: *gvk, obj: obj})
		}
	}
	return m, nil
}

// isEmptyYAML reports whether a document holds only comments and blanks.
func isEmptyYAML(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if len(l) > 0 && l[0] != '#' && string(l) != "---" {
			return false
		}
	}
	return true
}

// mustRender renders and lints: helm's lint rules (chart file, values
// against the schema, templates, dependencies) must report no warning or
// error for these values.
func mustRender(t *testing.T, vals map[string]any) *manifest {
	t.Helper()
	c := loadChart(t)
	m, err := render(c, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	linter := lint.AllWithKubeVersionAndSchemaValidation(chartDir, vals, namespace, kubeVersion, false)
	for _, msg := range linter.Messages {
		if msg.Severity >= support.WarningSev {
			t.Errorf("helm lint: %v", msg)
		} else {
			t.Logf("helm lint: %v", msg)
		}
	}
	if len(m.objects) == 0 {
		t.Fatal("rendered no objects")
	}
	return m
}

// Typed accessors.

func all[T runtime.Object](m *manifest) []T {
	var out []T
	for _, o := range m.objects {
		if v, ok := o.obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func find[T interface {
	runtime.Object
	GetName() string
}](t *testing.T, m *manifest, name string) T {
	t.Helper()
	for _, v := range all[T](m) {
		if v.GetName() == name {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T named %s; rendered: %v", zero, name, m.names())
	return zero
}

func has[T interface {
	runtime.Object
	GetName() string
}](m *manifest, name string) bool {
	for _, v := range all[T](m) {
		if v.GetName() == name {
			return true
		}
	}
	return false
}

func (m *manifest) names() []string {
	var out []string
	for _, o := range m.objects {
		out = append(out, o.gvk.Kind+"/"+o.name())
	}
	sort.Strings(out)
	return out
}

// podSpecs returns every pod template of the release by workload name.
func (m *manifest) podSpecs() map[string]corev1.PodTemplateSpec {
	out := map[string]corev1.PodTemplateSpec{}
	for _, d := range all[*appsv1.Deployment](m) {
		out[d.Name] = d.Spec.Template
	}
	for _, s := range all[*appsv1.StatefulSet](m) {
		out[s.Name] = s.Spec.Template
	}
	return out
}

// env resolves a container's environment: literal values, and ConfigMap
// references against the rendered ConfigMaps ("configmap:<name>/<key>"
// when the ConfigMap is not rendered). Secret references come back as
// "secret:<name>/<key>".
func (m *manifest) env(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			v, ok := "", false
			for _, cm := range all[*corev1.ConfigMap](m) {
				if cm.Name == ref.Name {
					v, ok = cm.Data[ref.Key]
				}
			}
			if !ok {
				t.Errorf("container %s: env %s refers to %s/%s, which is not rendered", c.Name, e.Name, ref.Name, ref.Key)
			}
			out[e.Name] = v
		case e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		case e.ValueFrom.FieldRef != nil:
			out[e.Name] = "field:" + e.ValueFrom.FieldRef.FieldPath
		default:
			t.Errorf("container %s: env %s has an unexpected source", c.Name, e.Name)
		}
	}
	return out
}

// container returns the one container of a Deployment.
func container(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%s: %d containers, want 1", d.Name, n)
	}
	return d.Spec.Template.Spec.Containers[0]
}

// valuesFile is a path under the chart's ci directory.
func valuesFile(name string) string { return filepath.Join(chartDir, "ci", name) }
