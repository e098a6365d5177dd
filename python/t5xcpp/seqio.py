"""The t5x.cpp seqio pipeline with seqio's names (docs/python.md).

    from t5xcpp import seqio
    ds = seqio.get_dataset("gpl3_prefix", {"inputs": 64, "targets": 64},
                           feature_converter=seqio.EncDecFeatureConverter(pack=True),
                           batch_size=8, shuffle=True, seed=0, shard_info=(0, 2), num_epochs=None)
    batch = next(ds)            # {"encoder_input_tokens": int32 [8, 64], ...}
    state = ds.get_state()      # JSON string; get_dataset(..., state=state) resumes

Batches are the C++ pipeline's (seqio::BatchedDataset, as the trainer reads
them): deterministic for a seed, resumable at any batch, sharded by
shard_info as seqio shards by host. Importing registers the built-in demo
tasks, the linked task modules and, when their data exist under
$T5X_DATA_DIR (default ./data), the Bible tasks.
"""
import numbers
import os
import sys

# TensorFlow, imported first, loads its own protobuf with global symbols; the
# SentencePiece library inside this module would bind to it and crash at
# import. Deep binding makes the module's libraries use their own first.
_dlopen_flags = sys.getdlopenflags()
sys.setdlopenflags(_dlopen_flags | getattr(os, "RTLD_DEEPBIND", 0))
try:
    from t5xcpp._seqio import (  # noqa: F401
        BatchIterator,
        ByteVocabulary,
        DataError,
        EncDecFeatureConverter,
        EncoderFeatureConverter,
        ExampleIterator,
        Feature,
        FeatureConverter,
        LMFeatureConverter,
        Mixture,
        PassThroughVocabulary,
        PrefixLMFeatureConverter,
        SentencePieceVocabulary,
        ShardInfo,
        Task,
        Vocabulary,
        data_root,
        get_dataset,
        get_mixture_or_task,
        get_subtasks,
        load_module,
        make_vocabulary,
        metrics,
        mixture_names,
        register_bible_tasks,
        register_builtin_tasks,
        task_names,
    )
finally:
    sys.setdlopenflags(_dlopen_flags)


def _registry(kind, names_fn):
    """seqio.TaskRegistry / seqio.MixtureRegistry, their read side."""

    def get(name):
        if name not in names_fn():
            get_mixture_or_task(name)  # raises with the closest names
            raise ValueError(f"'{name}' is not a {kind}")
        return get_mixture_or_task(name)

    return type(f"{kind}Registry", (), {"names": staticmethod(names_fn), "get": staticmethod(get)})


TaskRegistry = _registry("Task", task_names)
MixtureRegistry = _registry("Mixture", mixture_names)


def _as_text(values):
    # t5.evaluation.metrics take numbers too (accuracy on class ids, pearson
    # on floats): the C++ metrics read their decimal text.
    return [str(v) if isinstance(v, numbers.Number) and not isinstance(v, bool) else v for v in values]


def _metric_fn(name):
    def fn(targets, predictions):
        return metrics.compute(name, _as_text(targets), _as_text(predictions))

    fn.__name__ = name
    fn.__doc__ = f"t5.evaluation.metrics.{name}(targets, predictions) -> dict (C++ seqio metrics)"
    return fn


# metrics.bleu(targets, predictions), metrics.rouge(...), ... as in t5.evaluation.metrics.
for _name in metrics.metric_names():
    setattr(metrics, _name, _metric_fn(_name))

register_bible_tasks()
