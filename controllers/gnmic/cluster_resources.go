package gnmic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/collector"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

const (
	configFile          = "config.yaml"
	configMountPath     = "/etc/gnmic"
	labelCluster        = "operator.gnmic.dev/cluster"
	labelPromOutput     = "operator.gnmic.dev/prometheus-output"
	annotationConfigSum = "operator.gnmic.dev/config-sha256"
	// tunnelClientCAMountPath holds ca.crt, the CA of the devices' tunnel client certificates (clientCARef).
	tunnelClientCAMountPath = "/etc/gnmic/tunnel-client-ca"
)

// withTunnelClientCA mounts the key spec.grpcTunnel.clientCARef names as ca.crt at tunnelClientCAMountPath.
func withTunnelClientCA(tpl *corev1.PodTemplateSpec, c *gnmicv1alpha1.Cluster) {
	t := c.Spec.GRPCTunnel
	if t == nil || t.ClientCARef == nil || tunnelLeaf.spec(c) == nil {
		return
	}
	tpl.Spec.Volumes = append(tpl.Spec.Volumes, corev1.Volume{Name: "tunnel-client-ca", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: t.ClientCARef.Name,
			Items: []corev1.KeyToPath{{Key: t.ClientCARef.BundleKey(), Path: "ca.crt"}}}}})
	ctr := &tpl.Spec.Containers[0]
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "tunnel-client-ca", MountPath: tunnelClientCAMountPath, ReadOnly: true})
}

// clusterResourceName is the StatefulSet and headless Service name of a Cluster.
func clusterResourceName(c *gnmicv1alpha1.Cluster) string { return "gnmic-" + c.Name }

// podName is the name of collector pod i.
func podName(c *gnmicv1alpha1.Cluster, i int) string { return fmt.Sprintf("gnmic-%s-%d", c.Name, i) }

// podIndex parses the index out of a pod name of this cluster, or -1.
func podIndex(c *gnmicv1alpha1.Cluster, pod string) int {
	rest, ok := strings.CutPrefix(pod, "gnmic-"+c.Name+"-")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 {
		return -1
	}
	return i
}

func podLabels(c *gnmicv1alpha1.Cluster) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "gnmic",
		"app.kubernetes.io/instance":   c.Name,
		"app.kubernetes.io/managed-by": "quartet-operator",
		labelCluster:                   c.Name,
	}
}

// BaseConfig is the startup configuration the collectors of c get (see baseConfig); exported for the real-gNMIc
// check in test/gnmicreal.
func BaseConfig(c *gnmicv1alpha1.Cluster) (string, error) { return baseConfig(c) }

// baseConfig is the collector's startup configuration: only the API server, logging and the optional gNMI and
// tunnel servers. Everything else arrives through /api/v1/config/apply.
func baseConfig(c *gnmicv1alpha1.Cluster) (string, error) {
	cfg := map[string]any{
		"log": true,
		"api-server": map[string]any{
			"address":        fmt.Sprintf(":%d", c.RestPort()),
			"enable-metrics": true,
		},
	}
	if apiTLSEnabled(c) {
		// gNMIc's api-server.tls keys: mutual TLS. Only clients with a certificate of the CA that issued the API's
		// own (the operator's) get past the handshake: the API applies configurations, and GET /api/v1/config
		// returns device passwords in clear. The readiness probe is a TCP check for that reason.
		cfg["api-server"].(map[string]any)["tls"] = map[string]any{
			"cert-file":   apiTLSMountPath + "/" + corev1.TLSCertKey,
			"key-file":    apiTLSMountPath + "/" + corev1.TLSPrivateKeyKey,
			"ca-file":     apiTLSMountPath + "/" + caCertKey,
			"client-auth": "require-verify",
		}
	}
	if c.Spec.API != nil && c.Spec.API.GNMIPort != 0 {
		cfg["gnmi-server"] = map[string]any{"address": fmt.Sprintf(":%d", c.Spec.API.GNMIPort)}
	}
	if t := c.Spec.GRPCTunnel; t != nil {
		tunnel := map[string]any{"address": fmt.Sprintf(":%d", t.Port)}
		if tunnelLeaf.spec(c) != nil {
			// gNMIc's tunnel-server.tls keys. Without clientCARef no ca-file, so devices need no client
			// certificate to dial in; with it only devices holding a certificate of that CA can register.
			tls := map[string]any{
				"cert-file": tunnelLeaf.file(corev1.TLSCertKey),
				"key-file":  tunnelLeaf.file(corev1.TLSPrivateKeyKey),
			}
			if t.ClientCARef != nil {
				tls["ca-file"] = tunnelClientCAMountPath + "/ca.crt"
				tls["client-auth"] = "require-verify"
			}
			tunnel["tls"] = tls
		}
		cfg["tunnel-server"] = tunnel
	}
	data, err := yaml.Marshal(cfg)
	return string(data), err
}

// ensureResources creates or updates the ConfigMap, headless Service, optional tunnel Service, one Service per
// prometheus output and the StatefulSet (with stsReplicas pods). It returns the StatefulSet as stored.
func (r *ClusterReconciler) ensureResources(ctx context.Context, c *gnmicv1alpha1.Cluster, p *plan.Plan, stsReplicas int32, tls *clusterCerts) (*appsv1.StatefulSet, error) {
	config, err := baseConfig(c)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(config))
	name := clusterResourceName(c)
	lbls := podLabels(c)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name + "-config"}}
	if err := r.createOrUpdate(ctx, c, cm, func() {
		cm.Labels = lbls
		cm.Data = map[string]string{configFile: config}
	}); err != nil {
		return nil, err
	}

	ports := []corev1.ServicePort{{Name: "rest", Port: c.RestPort(), TargetPort: intstr.FromString("rest")}}
	if c.Spec.API != nil && c.Spec.API.GNMIPort != 0 {
		ports = append(ports, corev1.ServicePort{Name: "gnmi", Port: c.Spec.API.GNMIPort, TargetPort: intstr.FromString("gnmi")})
	}
	headless := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
	if err := r.createOrUpdate(ctx, c, headless, func() {
		headless.Labels = lbls
		headless.Spec.ClusterIP = corev1.ClusterIPNone
		headless.Spec.Selector = lbls
		headless.Spec.Ports = ports
		headless.Spec.PublishNotReadyAddresses = true
	}); err != nil {
		return nil, err
	}

	if t := c.Spec.GRPCTunnel; t != nil {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name + "-tunnel"}}
		if err := r.createOrUpdate(ctx, c, svc, func() {
			// ClusterIP unless the Cluster opts in: a LoadBalancer publishes the tunnel, and every
			// device that can reach it may try to register.
			applyTemplate(svc, t.Service, corev1.ServiceTypeClusterIP, lbls)
			svc.Spec.Selector = lbls
			svc.Spec.Ports = []corev1.ServicePort{{Name: "tunnel", Port: t.Port, TargetPort: intstr.FromInt32(t.Port)}}
		}); err != nil {
			return nil, err
		}
	}

	if err := r.ensureAPINetworkPolicy(ctx, c); err != nil {
		return nil, err
	}

	if err := r.ensurePrometheusServices(ctx, c, p, lbls); err != nil {
		return nil, err
	}

	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
	if err := r.createOrUpdate(ctx, c, sts, func() {
		sts.Labels = lbls
		sts.Spec.Replicas = &stsReplicas
		sts.Spec.ServiceName = name
		sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		sts.Spec.Selector = &metav1.LabelSelector{MatchLabels: lbls}
		sts.Spec.Template = podTemplate(c, lbls, hex.EncodeToString(sum[:]), r.PlatformAssignsUID)
		withCertificates(&sts.Spec.Template, tls)
		withTargetTLS(&sts.Spec.Template, c)
		withTunnelClientCA(&sts.Spec.Template, c)
	}); err != nil {
		return nil, err
	}
	return sts, nil
}

func applyTemplate(svc *corev1.Service, t *gnmicv1alpha1.ServiceTemplate, defaultType corev1.ServiceType, lbls map[string]string) {
	svc.Labels = map[string]string{}
	for k, v := range lbls {
		svc.Labels[k] = v
	}
	svc.Spec.Type = defaultType
	svc.Annotations = nil
	if t != nil {
		for k, v := range t.Labels {
			svc.Labels[k] = v
		}
		svc.Annotations = t.Annotations
		if t.Type != "" {
			svc.Spec.Type = t.Type
		}
	}
}

// annotationPromOutputName on a prometheus output's Service is the gNMIc output name its port was given to.
const annotationPromOutputName = "operator.gnmic.dev/output-name"

// prometheusPorts reads the ports the Cluster's prometheus output instances were given, by gNMIc output name.
func (r *ClusterReconciler) prometheusPorts(ctx context.Context, c *gnmicv1alpha1.Cluster) (map[string]int32, error) {
	existing := &corev1.ServiceList{}
	if err := r.List(ctx, existing, client.InNamespace(c.Namespace), client.MatchingLabels{labelCluster: c.Name},
		client.HasLabels{labelPromOutput}); err != nil {
		return nil, err
	}
	ports := map[string]int32{}
	for i := range existing.Items {
		svc := &existing.Items[i]
		if name := svc.Annotations[annotationPromOutputName]; name != "" && metav1.IsControlledBy(svc, c) && len(svc.Spec.Ports) > 0 {
			ports[name] = svc.Spec.Ports[0].Port
		}
	}
	return ports, nil
}

// ensurePrometheusServices keeps one headless Service per prometheus output instance in the plan and deletes the
// others. Headless, because each collector pod serves only the metrics of its own shard of targets: a scrape
// through a load-balancing Service would see 1/N of the data, so Prometheus must find and scrape every pod.
func (r *ClusterReconciler) ensurePrometheusServices(ctx context.Context, c *gnmicv1alpha1.Cluster, p *plan.Plan, lbls map[string]string) error {
	want := map[string]bool{}
	for _, out := range p.PrometheusOutputs {
		o := &gnmicv1alpha1.Output{}
		if err := r.Get(ctx, out.Output, o); err != nil {
			return client.IgnoreNotFound(err)
		}
		port := out.Port
		suffix := out.Output.Name
		if out.Name != plan.Name(out.Output.Namespace, out.Output.Name) {
			suffix = strings.ReplaceAll(strings.TrimPrefix(out.Name, out.Output.Namespace+"/"), "/", "-")
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: truncateName(clusterResourceName(c) + "-" + suffix)}}
		want[svc.Name] = true
		if err := r.dropIfHeadlessnessChanges(ctx, c, svc, o.Spec.Service); err != nil {
			return err
		}
		if err := r.createOrUpdate(ctx, c, svc, func() {
			applyTemplate(svc, o.Spec.Service, corev1.ServiceTypeClusterIP, lbls)
			svc.Labels[labelPromOutput] = out.Output.Name
			if svc.Annotations == nil {
				svc.Annotations = map[string]string{}
			}
			// The next plans read the port back by gNMIc output name (plan.Snapshot.PrometheusPorts).
			svc.Annotations[annotationPromOutputName] = out.Name
			svc.Spec.Selector = lbls
			if svc.Spec.Type == corev1.ServiceTypeClusterIP {
				svc.Spec.ClusterIP = corev1.ClusterIPNone
			}
			svc.Spec.Ports = []corev1.ServicePort{{Name: "metrics", Port: port, TargetPort: intstr.FromInt32(port)}}
		}); err != nil {
			return err
		}
	}
	existing := &corev1.ServiceList{}
	if err := r.List(ctx, existing, client.InNamespace(c.Namespace), client.MatchingLabels{labelCluster: c.Name},
		client.HasLabels{labelPromOutput}); err != nil {
		return err
	}
	for i := range existing.Items {
		svc := &existing.Items[i]
		if !want[svc.Name] && metav1.IsControlledBy(svc, c) {
			if err := client.IgnoreNotFound(r.Delete(ctx, svc)); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropIfHeadlessnessChanges deletes an existing Service of ours that must switch between headless and not: a
// Service's clusterIP cannot change in place. The caller creates it anew.
func (r *ClusterReconciler) dropIfHeadlessnessChanges(ctx context.Context, c *gnmicv1alpha1.Cluster, svc *corev1.Service, t *gnmicv1alpha1.ServiceTemplate) error {
	existing := &corev1.Service{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(svc), existing); err != nil {
		return client.IgnoreNotFound(err)
	}
	wantHeadless := t == nil || t.Type == "" || t.Type == corev1.ServiceTypeClusterIP
	if (existing.Spec.ClusterIP == corev1.ClusterIPNone) == wantHeadless || !metav1.IsControlledBy(existing, c) {
		return nil
	}
	return client.IgnoreNotFound(r.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}))
}

func truncateName(n string) string {
	if len(n) <= 63 {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return strings.TrimRight(n[:54], "-.") + "-" + hex.EncodeToString(sum[:])[:8]
}

// podTemplate runs `gnmic --config /etc/gnmic/config.yaml collector` under the restricted pod security standard,
// as a numeric non-root user unless the platform assigns one (see collector.PodSecurityContext), with the
// scheduling and pull-secret overrides of spec.podTemplate.
func podTemplate(c *gnmicv1alpha1.Cluster, lbls map[string]string, configSum string, platformAssignsUID bool) corev1.PodTemplateSpec {
	ports := []corev1.ContainerPort{{Name: "rest", ContainerPort: c.RestPort()}}
	if c.Spec.API != nil && c.Spec.API.GNMIPort != 0 {
		ports = append(ports, corev1.ContainerPort{Name: "gnmi", ContainerPort: c.Spec.API.GNMIPort})
	}
	if t := c.Spec.GRPCTunnel; t != nil {
		ports = append(ports, corev1.ContainerPort{Name: "tunnel", ContainerPort: t.Port})
	}
	env := append([]corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}, c.Spec.Env...)
	yes, no := true, false
	tpl := gnmicv1alpha1.CollectorPodTemplate{}
	if c.Spec.PodTemplate != nil {
		tpl = *c.Spec.PodTemplate
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbls, Annotations: map[string]string{annotationConfigSum: configSum}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			SecurityContext:              collector.PodSecurityContext(c.Spec.PodTemplate, platformAssignsUID),
			NodeSelector:                 tpl.NodeSelector,
			Tolerations:                  tpl.Tolerations,
			Affinity:                     tpl.Affinity,
			ImagePullSecrets:             tpl.ImagePullSecrets,
			Containers: []corev1.Container{{
				Name:      "gnmic",
				Image:     c.Spec.Image,
				Args:      []string{"--config", configMountPath + "/" + configFile, "collector"},
				Ports:     ports,
				Env:       env,
				Resources: c.Spec.Resources,
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/api/v1/healthz", Port: intstr.FromString("rest")}}, PeriodSeconds: 5},
				// The root filesystem is read-only: file outputs write to the data volume (plan.OutputDataDir).
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: configMountPath, ReadOnly: true},
					{Name: "data", MountPath: plan.OutputDataDir}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					// runAsNonRoot and the UID live at pod level, where spec.podTemplate.securityContext can change them.
					ReadOnlyRootFilesystem: &yes,
					Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:         &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: clusterResourceName(c) + "-config"}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// createOrUpdate writes obj only when mutate changed it, with the Cluster as controller owner.
func (r *ClusterReconciler) createOrUpdate(ctx context.Context, c *gnmicv1alpha1.Cluster, obj client.Object, mutate func()) error {
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, obj, func() error {
		mutate()
		return controllerutil.SetControllerReference(c, obj, r.Scheme())
	})
	return err
}

// resolveOutputAddresses resolves serviceRef/serviceSelector of the namespace's outputs to addresses.
func (r *ClusterReconciler) resolveOutputAddresses(ctx context.Context, outputs []gnmicv1alpha1.Output) map[ktypes.NamespacedName]string {
	out := map[ktypes.NamespacedName]string{}
	for i := range outputs {
		o := &outputs[i]
		key := ktypes.NamespacedName{Namespace: o.Namespace, Name: o.Name}
		switch {
		case o.Spec.ServiceRef != nil && o.Spec.ServiceRef.URL != "":
			out[key] = o.Spec.ServiceRef.URL
		case o.Spec.ServiceRef != nil:
			ref := o.Spec.ServiceRef
			ns := ref.Namespace
			if ns == "" {
				ns = o.Namespace
			}
			svc := &corev1.Service{}
			if err := r.Get(ctx, ktypes.NamespacedName{Namespace: ns, Name: ref.Name}, svc); err != nil {
				svc = nil
			}
			if port, ok := servicePort(svc, ref.Port); ok {
				if addr, err := plan.ResolveServiceAddress(o.Spec.Type, fmt.Sprintf("%s.%s.svc", ref.Name, ns), port); err == nil {
					out[key] = addr
				}
			}
		case o.Spec.ServiceSelector != nil:
			sel := o.Spec.ServiceSelector
			ns := sel.Namespace
			if ns == "" {
				ns = o.Namespace
			}
			list := &corev1.ServiceList{}
			if err := r.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(sel.MatchLabels)}); err != nil || len(list.Items) == 0 {
				continue
			}
			first := &list.Items[0]
			for j := range list.Items {
				if list.Items[j].Name < first.Name {
					first = &list.Items[j]
				}
			}
			if port, ok := servicePort(first, sel.Port); ok {
				if addr, err := plan.ResolveServiceAddress(o.Spec.Type, fmt.Sprintf("%s.%s.svc", first.Name, ns), port); err == nil {
					out[key] = addr
				}
			}
		}
	}
	return out
}

// servicePort resolves a port number or name; a number needs no Service.
func servicePort(svc *corev1.Service, port string) (int32, bool) {
	if n, err := strconv.Atoi(port); err == nil {
		return int32(n), true
	}
	if svc == nil {
		return 0, false
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == port {
			return p.Port, true
		}
	}
	return 0, false
}
