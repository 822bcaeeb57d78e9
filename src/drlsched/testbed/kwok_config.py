"""The kwok controller's configuration: node and pod lifecycle Stages, and kubelet metrics emulation.

Templates are kwok v0.8.0's own (`kustomize/stage/{node,pod}/fast`, `kustomize/metrics/{resource,usage}`), with
these changes:
- pods complete (exit 0, Ready turning False as kubelet does) after the duration in the `drlsched.io/run-duration`
  annotation, with no jitter: kwok uses the jitter *instead of* the duration when jitter <= duration;
- there is no node heartbeat stage: with no controller manager nothing would ever mark a silent node NotReady,
  so heartbeats would only load the apiserver;
- a node created by someone else (Karpenter's KWOK provider) gets the `metrics.k8s.io/resource-metrics-path`
  annotation our own nodes are made with (stage `node-metrics-path`), so metrics-server scrapes its pods too;
- a node's usage is its running pods' plus a small system baseline (`SYSTEM_CPU_CORES`, `SYSTEM_MEMORY_BYTES`:
  kubelet, runtime and OS, which a real node always reports). metrics-server drops a node whose CPU counter or
  working set reads 0, so without it an empty node would have no NodeMetrics.
"""

from __future__ import annotations

from drlsched.k8s.objects import (
    CPU_USAGE_ANNOTATION,
    DURATION_ANNOTATION,
    GPU_UTIL_ANNOTATION,
    MEMORY_USAGE_ANNOTATION,
)

RESOURCE_METRICS_PATH = "/metrics/nodes/{node}/metrics/resource"
METRICS_PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
GPU_METRICS_PATH = "/metrics/nodes/{node}/metrics/gpu"
SYSTEM_CPU_CORES = 0.05
SYSTEM_MEMORY_BYTES = 256 * 2**20

_NODE_INITIALIZE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-initialize}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: NotIn, values: ['True']}
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type  | Quote}}
      {{ end }}
      addresses:
      - address: {{ NodeIP | Quote }}
        type: InternalIP
      - address: {{ NodeName | Quote }}
        type: Hostname
      {{ with NodePort }}
      daemonEndpoints:
        kubeletEndpoint:
          Port: {{ . }}
      {{ end }}
      allocatable:
      {{ YAML .status.allocatable 1 }}
      capacity:
      {{ YAML .status.capacity 1 }}
      {{ $nodeInfo := .status.nodeInfo }}
      {{ $kwokVersion := printf "kwok-%s" Version }}
      nodeInfo:
        architecture: {{ or $nodeInfo.architecture "amd64" }}
        bootID: {{ or $nodeInfo.bootID `""` }}
        containerRuntimeVersion: {{ or $nodeInfo.containerRuntimeVersion $kwokVersion }}
        kernelVersion: {{ or $nodeInfo.kernelVersion $kwokVersion }}
        kubeProxyVersion: {{ or $nodeInfo.kubeProxyVersion $kwokVersion }}
        kubeletVersion: {{ or $nodeInfo.kubeletVersion $kwokVersion }}
        machineID: {{ or $nodeInfo.machineID `""` }}
        operatingSystem: {{ or $nodeInfo.operatingSystem "linux" }}
        osImage: {{ or $nodeInfo.osImage `""` }}
        systemUUID: {{ or $nodeInfo.systemUUID `""` }}
      phase: Running
"""

# metrics-server follows this annotation to kwok's per-node endpoint; nodes without it would go unscraped.
_NODE_METRICS_PATH = f"""\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: node-metrics-path}}
spec:
  resourceRef: {{apiGroup: v1, kind: Node}}
  selector:
    matchExpressions:
    - {{key: '.metadata.annotations["{METRICS_PATH_ANNOTATION}"]', operator: DoesNotExist}}
  next:
    patches:
    - root: metadata
      template: |
        annotations:
          {METRICS_PATH_ANNOTATION}: "{RESOURCE_METRICS_PATH.replace("{node}", "{{ .metadata.name }}")}"
"""

_POD_READY = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: [Pending]}
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: NotIn, values: ['True']}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      {{ range .spec.readinessGates }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      {{ $hostIPs := NodeIPsWith .spec.nodeName }}
      {{ with $hostIPs }}
      hostIP: {{ index . 0 | Quote }}
      hostIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      {{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      {{ with $podIPs }}
      podIP: {{ index . 0 | Quote }}
      podIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
"""

_POD_COMPLETE = f"""\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: pod-complete-after-duration}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    - {{key: '.metadata.deletionTimestamp', operator: DoesNotExist}}
    - {{key: '.status.phase', operator: In, values: [Running]}}
    - {{key: '.metadata.annotations["{DURATION_ANNOTATION}"]', operator: Exists}}
  delay:
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '.metadata.annotations["{DURATION_ANNOTATION}"]'
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        reason: PodCompleted
        status: "False"
        type: Ready
      - lastTransitionTime: {{{{ $now | Quote }}}}
        reason: PodCompleted
        status: "False"
        type: ContainersReady
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{{{ $now | Quote }}}}
            reason: Completed
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: Succeeded
"""

_POD_DELETE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-delete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: Exists}
  next:
    finalizers: {empty: true}
    delete: true
"""

# Only running pods use anything: kwok would otherwise keep counting Succeeded pods, which stay on their node.
_USAGE = f"""\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {{name: usage-from-annotation}}
spec:
  usages:
  - usage:
      cpu:
        expression: |
          pod.status.phase != "Running" ? Quantity("0")
          : "{CPU_USAGE_ANNOTATION}" in pod.metadata.annotations
          ? Quantity(pod.metadata.annotations["{CPU_USAGE_ANNOTATION}"])
          : Quantity("1m")
      memory:
        expression: |
          pod.status.phase != "Running" ? Quantity("0")
          : "{MEMORY_USAGE_ANNOTATION}" in pod.metadata.annotations
          ? Quantity(pod.metadata.annotations["{MEMORY_USAGE_ANNOTATION}"])
          : Quantity("1Mi")
"""


def _metric(name: str, dimension: str, kind: str, value: str, labels: tuple[str, ...]) -> str:
    label_values = {
        "container": "container.name",
        "namespace": "pod.metadata.namespace",
        "pod": "pod.metadata.name",
    }
    lines = [f"  - name: {name}", f"    dimension: {dimension}", f"    kind: {kind}", f"    value: '{value}'"]
    if labels:
        lines.append("    labels:")
        lines += [f"    - {{name: {label}, value: '{label_values[label]}'}}" for label in labels]
    return "\n".join(lines) + "\n"


_POD = ("namespace", "pod")
_CONTAINER = ("container", "namespace", "pod")

# kubelet's /metrics/resource, as served by kwok per node.
_RESOURCE_METRICS = (
    "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Metric\nmetadata: {name: metrics-resource}\nspec:\n"
    f'  path: "{RESOURCE_METRICS_PATH.replace("{node}", "{nodeName}")}"\n  metrics:\n'
    + _metric("scrape_error", "node", "gauge", "0", ())
    + _metric("container_start_time_seconds", "container", "gauge", "pod.SinceSecond()", _CONTAINER)
    + _metric(
        "container_cpu_usage_seconds_total",
        "container",
        "counter",
        'pod.CumulativeUsage("cpu", container.name)',
        _CONTAINER,
    )
    + _metric(
        "container_memory_working_set_bytes",
        "container",
        "gauge",
        'pod.Usage("memory", container.name)',
        _CONTAINER,
    )
    + _metric("pod_cpu_usage_seconds_total", "pod", "counter", 'pod.CumulativeUsage("cpu")', _POD)
    + _metric("pod_memory_working_set_bytes", "pod", "gauge", 'pod.Usage("memory")', _POD)
    + _metric("node_cpu_usage_seconds_total", "node", "counter",
              f'node.CumulativeUsage("cpu") + node.SinceSecond() * {SYSTEM_CPU_CORES}', ())
    + _metric("node_memory_working_set_bytes", "node", "gauge",
              f'node.Usage("memory") + {float(SYSTEM_MEMORY_BYTES)}', ())
)

# A per-pod GPU utilisation gauge (no kubelet equivalent; DCGM exports the real one), read from an annotation.
_GPU_METRICS = (
    "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Metric\nmetadata: {name: metrics-gpu}\nspec:\n"
    f'  path: "{GPU_METRICS_PATH.replace("{node}", "{nodeName}")}"\n  metrics:\n'
    + _metric(
        "pod_gpu_utilization",
        "pod",
        "gauge",
        f'pod.status.phase == "Running" && "{GPU_UTIL_ANNOTATION}" in pod.metadata.annotations'
        f' ? double(pod.metadata.annotations["{GPU_UTIL_ANNOTATION}"]) : 0.0',
        _POD,
    )
)


def kwok_config() -> str:
    """The multi-document YAML passed to `kwok --config`."""
    documents = (
        _NODE_INITIALIZE,
        _NODE_METRICS_PATH,
        _POD_READY,
        _POD_COMPLETE,
        _POD_DELETE,
        _USAGE,
        _RESOURCE_METRICS,
        _GPU_METRICS,
    )
    return "---\n".join(documents)
