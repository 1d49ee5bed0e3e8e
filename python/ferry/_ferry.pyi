"""Type stubs of the extension module ferry._ferry (written by hand; re-exported by the ferry package)."""

import os
from typing import Any, Callable, Literal, Mapping, Optional, Sequence, Union, overload

import numpy as np
import numpy.typing as npt

PathLike = Union[str, os.PathLike]
DType = Union[str, Any]  # "bfloat16", "float16", "float32", "bf16", ..., or a torch / numpy dtype
MaxMemory = Mapping[Union[int, str], Union[int, str]]  # {0: "20GiB", "cpu": "8GiB", "disk": 10**12}
DeviceMap = dict[str, Union[int, str]]  # {module name: GPU index | "cpu" | "disk"}
TokenIds = Union[Sequence[int], Sequence[Sequence[int]], npt.ArrayLike]
Streamer = Callable[[str, int], Optional[bool]]

class Tokenizer:
    """A Hugging Face fast tokenizer (tokenizer.json), run by ferry. Thread-safe."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]: ...
    def decode(self, ids: TokenIds, skip_special_tokens: bool = False) -> str: ...
    def batch_decode(self, sequences: TokenIds, skip_special_tokens: bool = False) -> list[str]: ...
    def __call__(self, text: Union[str, Sequence[str]], add_special_tokens: bool = True,
                 return_tensors: Optional[Literal["np", "pt"]] = None) -> dict[str, Any]: ...
    def convert_tokens_to_ids(self, token: str) -> Optional[int]: ...
    def convert_ids_to_tokens(self, id: int) -> Optional[str]: ...
    @property
    def vocab_size(self) -> int: ...
    def __len__(self) -> int: ...
    @property
    def all_special_ids(self) -> list[int]: ...

class AutoTokenizer:
    """transformers' AutoTokenizer, for tokenizer.json files."""

    @staticmethod
    def from_pretrained(path: PathLike) -> Tokenizer: ...

class GenerateOutput:
    """What generate(..., return_dict=True) returns."""

    @property
    def sequences(self) -> npt.NDArray[np.int64]: ...
    @property
    def generated_ids(self) -> list[int]: ...
    @property
    def text(self) -> str: ...
    @property
    def stop_reason(self) -> Literal["eos_token", "stop_string", "max_new_tokens", "max_length", "cancelled"]: ...
    @property
    def prefill_seconds(self) -> float: ...
    @property
    def decode_seconds(self) -> float: ...
    @property
    def speculative(self) -> dict[str, int]:
        """Speculative decoding's counts: proposed, accepted, target_forwards, draft_forwards."""
    @property
    def prefill_tokens_per_second(self) -> float: ...
    @property
    def decode_tokens_per_second(self) -> float: ...

class PreTrainedModel:
    """A model loaded by AutoModelForCausalLM / AutoModelForSeq2SeqLM. Calls release the GIL; calls on one model
    from several threads run one at a time."""

    def __call__(self, input_ids: TokenIds, decoder_input_ids: Optional[TokenIds] = None,
                 logits_to_keep: int = 0) -> npt.NDArray[np.float32]: ...
    @overload
    def generate(self, inputs: str, max_new_tokens: int = 20, do_sample: bool = False, temperature: float = 1.0,
                 top_k: int = 50, top_p: float = 1.0, min_p: float = 0.0, repetition_penalty: float = 1.0,
                 seed: Optional[int] = None, stop: Union[None, str, Sequence[str]] = None,
                 eos_token_id: Optional[Sequence[int]] = None, streamer: Optional[Streamer] = None,
                 skip_special_tokens: bool = True, add_special_tokens: bool = True,
                 return_dict: Literal[False] = False, assistant_model: Optional[PreTrainedModel] = None,
                 prompt_lookup_num_tokens: Optional[int] = None,
                 num_assistant_tokens: Optional[int] = None,
                 assistant_confidence_threshold: Optional[float] = None) -> str: ...
    @overload
    def generate(self, inputs: TokenIds, max_new_tokens: int = 20, do_sample: bool = False,
                 temperature: float = 1.0, top_k: int = 50, top_p: float = 1.0, min_p: float = 0.0,
                 repetition_penalty: float = 1.0, seed: Optional[int] = None,
                 stop: Union[None, str, Sequence[str]] = None, eos_token_id: Optional[Sequence[int]] = None,
                 streamer: Optional[Streamer] = None, skip_special_tokens: bool = True,
                 add_special_tokens: bool = True, return_dict: Literal[False] = False,
                 assistant_model: Optional[PreTrainedModel] = None, prompt_lookup_num_tokens: Optional[int] = None,
                 num_assistant_tokens: Optional[int] = None,
                 assistant_confidence_threshold: Optional[float] = None) -> npt.NDArray[np.int64]: ...
    @overload
    def generate(self, inputs: Union[str, TokenIds], max_new_tokens: int = 20, do_sample: bool = False,
                 temperature: float = 1.0, top_k: int = 50, top_p: float = 1.0, min_p: float = 0.0,
                 repetition_penalty: float = 1.0, seed: Optional[int] = None,
                 stop: Union[None, str, Sequence[str]] = None, eos_token_id: Optional[Sequence[int]] = None,
                 streamer: Optional[Streamer] = None, skip_special_tokens: bool = True,
                 add_special_tokens: bool = True, *, return_dict: Literal[True],
                 assistant_model: Optional[PreTrainedModel] = None, prompt_lookup_num_tokens: Optional[int] = None,
                 num_assistant_tokens: Optional[int] = None,
                 assistant_confidence_threshold: Optional[float] = None) -> GenerateOutput: ...
    def follow_pipeline(self) -> None:
        """On a rank other than 0 of a pipeline: repeats rank 0's forwards until rank 0 calls end_pipeline()."""
    def end_pipeline(self) -> None:
        """On rank 0 of a pipeline: the other ranks return from follow_pipeline()."""
    @property
    def hf_device_map(self) -> Optional[DeviceMap]: ...
    @property
    def config(self) -> Optional[dict[str, Any]]: ...
    @property
    def tokenizer(self) -> Optional[Tokenizer]: ...
    @property
    def is_encoder_decoder(self) -> bool: ...
    @property
    def architecture(self) -> str: ...
    @property
    def eos_token_id(self) -> list[int]: ...
    @property
    def name_or_path(self) -> str: ...
    @property
    def experts(self) -> Optional[dict[str, Any]]: ...
    @property
    def expert_cache_stats(self) -> Optional[dict[str, int]]: ...
    def num_parameters(self) -> int: ...

class AutoModelForCausalLM:
    """transformers' AutoModelForCausalLM: Llama, Mistral, Qwen2, GPT-2, GPT-J (folders or GGUF files)."""

    @staticmethod
    def from_pretrained(pretrained_model_name_or_path: PathLike,
                        device_map: Union[None, str, Mapping[str, Union[int, str]]] = None,
                        max_memory: Optional[MaxMemory] = None, offload_folder: Optional[PathLike] = None,
                        dtype: Optional[DType] = None, no_split_module_classes: Optional[Sequence[str]] = None,
                        prefetch: int | Literal["auto"] = "auto", offload_io: Literal["auto", "direct", "mmap"] = "auto",
                        quantize: Optional[str] = None, torch_dtype: Optional[DType] = None,
                        plan_by_expert: bool = True,
                        expert_cache: Union[int, str] = "auto", guess_experts: bool = False,
                        micro_batches: int = 0) -> PreTrainedModel: ...
    @staticmethod
    def from_config(config: Union[PathLike, Mapping[str, Any]], dtype: Optional[DType] = None) -> PreTrainedModel: ...

class AutoModelForSeq2SeqLM:
    """transformers' AutoModelForSeq2SeqLM: T5, T0pp, Flan-T5, MT5, UMT5."""

    @staticmethod
    def from_pretrained(pretrained_model_name_or_path: PathLike,
                        device_map: Union[None, str, Mapping[str, Union[int, str]]] = None,
                        max_memory: Optional[MaxMemory] = None, offload_folder: Optional[PathLike] = None,
                        dtype: Optional[DType] = None, no_split_module_classes: Optional[Sequence[str]] = None,
                        prefetch: int | Literal["auto"] = "auto", offload_io: Literal["auto", "direct", "mmap"] = "auto",
                        quantize: Optional[str] = None, torch_dtype: Optional[DType] = None,
                        plan_by_expert: bool = True,
                        expert_cache: Union[int, str] = "auto", guess_experts: bool = False,
                        micro_batches: int = 0) -> PreTrainedModel: ...
    @staticmethod
    def from_config(config: Union[PathLike, Mapping[str, Any]], dtype: Optional[DType] = None) -> PreTrainedModel: ...

class _InitEmptyWeights:
    def __enter__(self) -> "_InitEmptyWeights": ...
    def __exit__(self, *exc: object) -> bool: ...

def init_empty_weights(include_buffers: bool = False) -> _InitEmptyWeights: ...
def infer_auto_device_map(model: Union[PreTrainedModel, PathLike, Mapping[str, Any]],
                          max_memory: Optional[MaxMemory] = None,
                          no_split_module_classes: Optional[Sequence[str]] = None, dtype: Optional[DType] = None,
                          clean_result: bool = True, offload_buffers: bool = False,
                          strategy: Literal["accelerate", "fast"] = "accelerate") -> DeviceMap: ...
def cpu_isa() -> str:
    """The CPU kernels in use: 'scalar', 'avx2', 'avx512' or 'amx' (bf16 linear layers on Intel AMX tiles)."""
def supported_isas() -> list[str]:
    """Every kernel set this CPU runs, lowest first."""
def set_cpu_isa(isa: str) -> None:
    """Caps the CPU kernels for this process (as FERRY_ISA or the CLI's --isa)."""
def get_rank() -> int:
    """This process's rank in the job (0 outside mpirun). torch.distributed.get_rank"""
def get_world_size() -> int:
    """The number of ranks in the job (1 outside mpirun). torch.distributed.get_world_size"""
def _raise_for_test(kind: str, problem: str, where: str = "", hint: str = "") -> None: ...
