package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// deploy/kubernetes/holdfast.yaml decodes strictly into the Kubernetes API types (a field
// misspelled or misplaced fails), its container's flags parse and check with `holdfast
// serve`'s own parser for each pod, and its parts fit together: routes naming every pod
// by the headless Service, probes on the metrics listener, the data volume at --data,
// a disruption budget of one, pods started together.
func TestKubernetesManifests(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/kubernetes/holdfast.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var (
		services []corev1.Service
		sts      *appsv1.StatefulSet
		pdb      *policyv1.PodDisruptionBudget
	)
	for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var obj any
		switch meta.Kind {
		case "Service":
			services = append(services, corev1.Service{})
			obj = &services[len(services)-1]
		case "StatefulSet":
			sts = &appsv1.StatefulSet{}
			obj = sts
		case "PodDisruptionBudget":
			pdb = &policyv1.PodDisruptionBudget{}
			obj = pdb
		default:
			t.Fatalf("document %d: kind %q", i, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("document %d (%s): %v", i, meta.Kind, err)
		}
	}
	if sts == nil || pdb == nil || len(services) != 2 {
		t.Fatalf("want a StatefulSet, a PodDisruptionBudget and two Services")
	}
	labels := sts.Spec.Template.Labels
	var headless *corev1.Service
	for i := range services {
		s := &services[i]
		for k, v := range s.Spec.Selector {
			if labels[k] != v {
				t.Errorf("service %s selects %s=%s, the pods are labelled %v", s.Name, k, v, labels)
			}
		}
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = s
		}
	}
	if headless == nil || headless.Name != sts.Spec.ServiceName || !headless.Spec.PublishNotReadyAddresses {
		t.Fatalf("the StatefulSet's service %q must be headless and publish pods before they are ready", sts.Spec.ServiceName)
	}
	replicas := int(*sts.Spec.Replicas)
	if replicas != 3 || sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("replicas %d, pod management %q: want 3, Parallel", replicas, sts.Spec.PodManagementPolicy)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector == nil ||
		!matches(pdb.Spec.Selector.MatchLabels, labels) || !matches(sts.Spec.Selector.MatchLabels, labels) {
		t.Errorf("the disruption budget and the StatefulSet must select the pods, one unavailable at most")
	}
	pod := sts.Spec.Template.Spec
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 10 {
		t.Errorf("termination grace period %v: the hand-over needs time", g)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	for i := 0; i < replicas; i++ {
		name := fmt.Sprintf("%s-%d", sts.Name, i)
		args := slices.Clone(c.Args)
		for j, a := range args {
			args[j] = strings.ReplaceAll(a, "$(POD_NAME)", name)
		}
		cfg, err := parseServeFlags(args)
		if err != nil {
			t.Fatalf("pod %s: holdfast serve %s: %v", name, strings.Join(args, " "), err)
		}
		if cfg.node != name || cfg.replicas != replicas {
			t.Errorf("pod %s: node %q, replicas %d", name, cfg.node, cfg.replicas)
		}
		for k := 0; k < replicas; k++ {
			route := fmt.Sprintf("nats://%s-%d.%s:", sts.Name, k, headless.Name)
			if !slices.ContainsFunc(cfg.natsCluster.Routes, func(r string) bool { return strings.HasPrefix(r, route) }) {
				t.Errorf("--routes %v does not name pod %d as %s...", cfg.natsCluster.Routes, k, route)
			}
		}
		metrics := cfg.metricsListen[strings.LastIndexByte(cfg.metricsListen, ':')+1:]
		for probe, path := range map[*corev1.Probe]string{c.StartupProbe: "/livez", c.LivenessProbe: "/livez", c.ReadinessProbe: "/readyz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || portOf(c, probe.HTTPGet.Port.String()) != metrics {
				t.Errorf("the %s probe must get %s on the metrics listener (port %s)", path, path, metrics)
			}
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.MountPath == cfg.data && slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(v corev1.PersistentVolumeClaim) bool { return v.Name == m.Name })
		}) {
			t.Errorf("--data %s is not a volume of the pod's own claim", cfg.data)
		}
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}) {
		t.Error("POD_NAME must come from the pod's name: it is the node's name")
	}
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// portOf is a probe port's number: given as a number, or a named container port.
func portOf(c corev1.Container, port string) string {
	for _, p := range c.Ports {
		if p.Name == port {
			return strconv.Itoa(int(p.ContainerPort))
		}
	}
	return port
}
