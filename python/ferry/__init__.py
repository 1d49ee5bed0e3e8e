"""ferry: models bigger than your GPU or RAM, with the API of transformers and Accelerate.

    import ferry
    tok = ferry.AutoTokenizer.from_pretrained("TinyLlama-1.1B")
    model = ferry.AutoModelForCausalLM.from_pretrained("TinyLlama-1.1B", device_map="auto",
                                                     max_memory={"cpu": "1GiB"}, offload_folder="/tmp/offload")
    print(model.generate("The capital of France is", max_new_tokens=20))

The C++ library does the work (ferry._ferry); this package only re-exports it. Errors are ferry.Error subclasses
that are also FileNotFoundError, MemoryError or ValueError.
"""

from ._errors import Error, InvalidValueError, NotFoundError, OutOfMemoryError
from ._ferry import (
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    GenerateOutput,
    PreTrainedModel,
    Tokenizer,
    cpu_isa,
    get_rank,
    get_world_size,
    infer_auto_device_map,
    init_empty_weights,
    set_cpu_isa,
    supported_isas,
)

__version__ = "0.1.0"

__all__ = [
    "AutoModelForCausalLM",
    "AutoModelForSeq2SeqLM",
    "AutoTokenizer",
    "Error",
    "GenerateOutput",
    "InvalidValueError",
    "NotFoundError",
    "OutOfMemoryError",
    "PreTrainedModel",
    "Tokenizer",
    "cpu_isa",
    "get_rank",
    "get_world_size",
    "infer_auto_device_map",
    "init_empty_weights",
    "set_cpu_isa",
    "supported_isas",
]
