"""A Kubernetes manifest that runs a deployment: a Deployment of single-node servers, or a LeaderWorkerSet
(sigs.k8s.io/lws, API leaderworkerset.x-k8s.io/v1) when one server spans nodes; a Service in front; a
ConfigMap for the files the server reads. GPUs are requested through the vendor's device-plugin resource."""

from __future__ import annotations

from planner.deploy.command import CONFIG_DIR, EngineLaunch, shell_command
from planner.deploy.spec import DeploymentSpec

# Device-plugin resources: NVIDIA's k8s-device-plugin, AMD's ROCm k8s-device-plugin, Intel Gaudi's plugin.
GPU_RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "intel": "habana.ai/gaudi"}
SHM_SIZE = "16Gi"  # /dev/shm for NCCL and the engines' worker processes (the container default of 64 MiB is too small)


def app_name(spec: DeploymentSpec) -> str:
    model = spec.model.rsplit("/", 1)[-1].lower()
    clean = "".join(c if c.isalnum() else "-" for c in model).strip("-") or "model"
    return f"{spec.engine.replace('.', '-')}-{clean}"[:52].rstrip("-")


def resource_name(vendor: str) -> str | None:
    return GPU_RESOURCES.get(vendor)


def _container(spec: DeploymentSpec, launch: EngineLaunch, gpus: int, script: str | None) -> dict:
    resource = resource_name(spec.vendor) or "nvidia.com/gpu"
    container: dict = {"name": "server", "image": launch.image}
    if script is None:
        container |= {"command": [launch.serve_argv[0]], "args": list(launch.serve_argv[1:])}
    else:
        container |= {"command": ["/bin/sh", "-c"], "args": [script]}
    container |= {
        "ports": [{"name": "http", "containerPort": launch.port}],
        "resources": {"limits": {resource: gpus}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if launch.files:
        container["volumeMounts"].append({"name": "headroom-config", "mountPath": CONFIG_DIR, "readOnly": True})
    return container


def _pod(spec: DeploymentSpec, launch: EngineLaunch, gpus: int, script: str | None, probe: bool) -> dict:
    container = _container(spec, launch, gpus, script)
    if probe:
        container["readinessProbe"] = {
            "httpGet": {"path": launch.health_path, "port": launch.port},
            "initialDelaySeconds": 60,
            "periodSeconds": 10,
            "failureThreshold": 360,  # loading a large checkpoint takes a while
        }
    volumes: list[dict] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}}]
    if launch.files:
        volumes.append({"name": "headroom-config", "configMap": {"name": f"{app_name(spec)}-config"}})
    return {"containers": [container], "volumes": volumes}


def _workload(spec: DeploymentSpec, launch: EngineLaunch) -> dict:
    name, labels = app_name(spec), {"app": app_name(spec)}
    meta = {"name": name, "labels": labels}
    if spec.nodes_per_server <= 1:
        pod = _pod(spec, launch, launch.gpus_per_server, None, probe=True)
        template = {"metadata": {"labels": labels}, "spec": pod}
        body = {"replicas": launch.servers, "selector": {"matchLabels": labels}, "template": template}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": body}
    nodes = spec.nodes_per_server
    per_node = launch.gpus_per_server // nodes if launch.gpus_per_server % nodes == 0 else spec.node_gpus
    leader = _pod(spec, launch, per_node, launch.leader_script or shell_command(launch.serve_argv), probe=True)
    worker = _pod(spec, launch, per_node, launch.worker_script or "sleep infinity", probe=False)
    group = {
        "size": spec.nodes_per_server,
        "restartPolicy": "RecreateGroupOnPodRestart",
        "leaderTemplate": {"metadata": {"labels": {**labels, "role": "leader"}}, "spec": leader},
        "workerTemplate": {"metadata": {"labels": {**labels, "role": "worker"}}, "spec": worker},
    }
    body = {"replicas": launch.servers, "leaderWorkerTemplate": group}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta, "spec": body}


def manifest_objects(spec: DeploymentSpec, launch: EngineLaunch) -> list[dict]:
    """The objects, in the order `kubectl apply` needs them."""
    name = app_name(spec)
    objects = []
    if launch.files:
        config = {"name": f"{name}-config", "labels": {"app": name}}
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": config, "data": dict(launch.files)})
    objects.append(_workload(spec, launch))
    selector = {"app": name} if spec.nodes_per_server <= 1 else {"app": name, "role": "leader"}
    port = {"name": "http", "port": launch.port, "targetPort": launch.port}
    service = {"selector": selector, "ports": [port], "type": "ClusterIP"}
    objects.append(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {"app": name}}, "spec": service}
    )
    return objects


def manifest_notes(spec: DeploymentSpec, launch: EngineLaunch) -> list[str]:
    notes = []
    if resource_name(spec.vendor) is None:
        notes.append(f"No Kubernetes GPU resource is known for {spec.gpu_name}; the manifest requests nvidia.com/gpu.")
    if spec.nodes_per_server > 1:
        notes.append(
            f"A server needs {launch.gpus_per_server} GPUs, more than a node's {spec.node_gpus}: it runs as a "
            f"LeaderWorkerSet of {spec.nodes_per_server} pods (install sigs.k8s.io/lws first)."
        )
    notes.append(f"Benchmark through the Service: --base-url http://{app_name(spec)}:{launch.port}.")
    return notes
