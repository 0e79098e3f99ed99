// Package check decodes netrig's Kubernetes manifests (deploy/k8s/*.yaml) strictly into
// Kubernetes' own types (k8s.io/api): an unknown or misspelt field, a value of the wrong type or
// a duplicated key is an error naming the file, the document and the field.
package check

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kinds are the objects netrig's manifests may hold, by apiVersion and kind.
var kinds = map[string]func() any{
	"v1/Namespace":       func() any { return &corev1.Namespace{} },
	"v1/ConfigMap":       func() any { return &corev1.ConfigMap{} },
	"v1/Secret":          func() any { return &corev1.Secret{} },
	"v1/Service":         func() any { return &corev1.Service{} },
	"apps/v1/DaemonSet":  func() any { return &appsv1.DaemonSet{} },
	"apps/v1/Deployment": func() any { return &appsv1.Deployment{} },
}

var separator = regexp.MustCompile(`(?m)^---\s*$`)

// Object is one decoded document: where it came from and the typed object.
type Object struct {
	File  string
	Index int
	Kind  string
	Value any
}

// Decode reads every document of one manifest strictly.
func Decode(name string, text []byte) ([]Object, error) {
	var out []Object
	for i, doc := range separator.Split(string(text), -1) {
		if len(bytes.TrimSpace([]byte(stripComments(doc)))) == 0 {
			continue
		}
		var head metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("%s, document %d: %v", name, i+1, err)
		}
		key := head.APIVersion + "/" + head.Kind
		make, ok := kinds[key]
		if !ok {
			return nil, fmt.Errorf("%s, document %d: %s is not a kind these manifests use (%v)", name, i+1, key, known())
		}
		obj := make()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("%s, document %d (%s): %v", name, i+1, head.Kind, err)
		}
		out = append(out, Object{name, i + 1, head.Kind, obj})
	}
	return out, nil
}

// DecodeDir reads every *.yaml of dir.
func DecodeDir(dir string) ([]Object, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("%s: no manifests (%v)", dir, err)
	}
	var out []Object
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := Decode(filepath.Base(f), text)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func stripComments(doc string) string {
	return regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")
}

func known() []string {
	var k []string
	for key := range kinds {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}
