"""`deploy --format k8s`: parseable YAML that runs the servers: a Deployment of single-node servers, a
LeaderWorkerSet when one server holds more GPUs than a node, the vendor's GPU resource, the files as a ConfigMap."""

from __future__ import annotations

import yaml

from planner.deploy import deploy
from planner.deploy.yaml_text import document
from planner.inference.scenario import InferenceScenario
from planner.plan import plan


def _objects(engine: str | None = None, **fields) -> dict[str, dict]:
    manifest = deploy(plan(InferenceScenario.model_validate(fields)), engine).manifest()
    return {doc["kind"]: doc for doc in yaml.safe_load_all(manifest)}


def test_single_node_servers_are_a_deployment_with_the_serve_command_as_args():
    objects = _objects(model="llama-3.1-70b", num_gpus=8, tensor_parallel=4)  # two replicas of 4 GPUs
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["vllm"]
    assert container["args"][:2] == ["serve", "meta-llama/Llama-3.1-70B"]
    assert container["args"][container["args"].index("--tensor-parallel-size") + 1] == "4"
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 4}
    assert container["image"] == "vllm/vllm-openai:latest"
    assert objects["Service"]["spec"]["ports"][0]["port"] == 8000
    assert objects["Service"]["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_one_replica_larger_than_a_node_is_a_leader_worker_set():
    # Llama 3.1 405B at TP 8 x PP 2: 16 GPUs per replica on 8-GPU nodes, two replicas
    objects = _objects(model="llama-3.1-405b", num_gpus=32, tensor_parallel=8, pipeline_parallel=2)
    lws = objects["LeaderWorkerSet"]
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and "Deployment" not in objects
    assert lws["spec"]["replicas"] == 2 and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"] == {"nvidia.com/gpu": 8} == worker["resources"]["limits"]
    assert (
        "--pipeline-parallel-size 2" in leader["args"][0] and "--distributed-executor-backend ray" in leader["args"][0]
    )
    assert worker["args"] == ["ray start --address=$LWS_LEADER_ADDRESS:6379 --block"]
    assert objects["Service"]["spec"]["selector"]["role"] == "leader"


def test_amd_gpus_and_sglang_across_nodes():
    objects = _objects("sglang", model="llama-3.1-405b", gpu="mi300x", num_gpus=16, tensor_parallel=16)
    leader = objects["LeaderWorkerSet"]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"] == {"amd.com/gpu": 8}
    assert "--nnodes 2 --node-rank $LWS_WORKER_INDEX --dist-init-addr $LWS_LEADER_ADDRESS:20000" in leader["args"][0]


def test_the_tensorrt_llm_options_file_is_a_mounted_config_map():
    objects = _objects("tensorrt-llm", model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, kv_cache_dtype="fp8")
    options = yaml.safe_load(objects["ConfigMap"]["data"]["extra_llm_api_options.yaml"])
    assert options == {
        "kv_cache_config": {"free_gpu_memory_fraction": 0.9, "enable_block_reuse": False, "dtype": "fp8"}
    }
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert {"name": "headroom-config", "mountPath": "/etc/headroom", "readOnly": True} in pod["containers"][0][
        "volumeMounts"
    ]
    assert pod["volumes"][1]["configMap"]["name"] == objects["ConfigMap"]["metadata"]["name"]


def test_the_yaml_writer_keeps_every_type():
    data = {"on": "yes", "n": ["8", 8, 0.5, True, None, {}, []], "nvidia.com/gpu": 2, "args": ["--x", "a: b", "#c"]}
    assert yaml.safe_load(document(data)) == data
