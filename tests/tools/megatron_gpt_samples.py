#!/usr/bin/env python3
"""megatron_gpt_samples.py: an independent reference for the training samples of
Megatron-Core's GPT datasets, written step by step after megatron/core/datasets
(blended_megatron_dataset_builder.py, blended_megatron_dataset_config.py, gpt_dataset.py,
blended_dataset.py, helpers.cpp, utils.py) with numpy.random.RandomState, over Megatron
.bin/.idx corpora. It prints samples in the format of `pretrain_gpt --print-sample`:
    SPLIT I: t0 t1 ... tS
With --write-cache DIR it also saves the index cache of the printed split as Megatron-Core
does (megatron_dataset.py unique_description and its MD5, gpt_dataset.py
_build_document_sample_shuffle_indices, blended_dataset.py _build_indices, helpers.py dtypes):
<md5>-GPTDataset-<split>-{description.txt,document_index.npy,sample_index.npy,shuffle_index.npy}
and <md5>-BlendedDataset-<split>-{description.txt,dataset_index.npy,dataset_sample_index.npy},
the tokenizer identifiers being those of megatron.core.tokenizers' MegatronTokenizerText as
build_tokenizer makes it from --tokenizer-type, --vocab-size, --vocab-file, --merge-file,
--tokenizer-model.
Usage:
  megatron_gpt_samples.py --seq-length S --seed N --samples TRAIN VALID TEST --split 969,30,1
      --print SPLIT:I-J (--data-path WORDS... | --train-data-path ... --valid-data-path ...)
  megatron_gpt_samples.py --split-bounds SPLIT N   (for 1..N documents, one line each:
      "DOCS: BEG-END BEG-END BEG-END", None for a split Megatron does not build)
"""
import argparse
import collections
import functools
import hashlib
import json
import os
import math
import re
import struct
import sys

import numpy

SPLITS = ["train", "valid", "test"]
DTYPES = {1: numpy.uint8, 2: numpy.int8, 3: numpy.int16, 4: numpy.int32, 5: numpy.int64,
          6: numpy.float64, 7: numpy.float32, 8: numpy.uint16}


class IndexedDataset:
    """Megatron's MMIDIDX .idx/.bin pair: sequence lengths and tokens."""

    def __init__(self, prefix):
        with open(prefix + ".idx", "rb") as f:
            assert f.read(9) == b"MMIDIDX\x00\x00", prefix
            (version,) = struct.unpack("<Q", f.read(8))
            assert version == 1
            (code,) = struct.unpack("<B", f.read(1))
            (sequence_count,) = struct.unpack("<Q", f.read(8))
            (document_count,) = struct.unpack("<Q", f.read(8))
            self.dtype = DTYPES[code]
            self.sequence_lengths = numpy.frombuffer(f.read(4 * sequence_count), dtype=numpy.int32)
            self.sequence_pointers = numpy.frombuffer(f.read(8 * sequence_count), dtype=numpy.int64)
        self.bin = numpy.memmap(prefix + ".bin", dtype=numpy.uint8, mode="r")

    def get(self, idx, offset=0, length=None):
        if length is None:
            length = self.sequence_lengths[idx] - offset
        size = numpy.dtype(self.dtype).itemsize
        start = int(self.sequence_pointers[idx]) + int(offset) * size
        return numpy.frombuffer(self.bin[start:start + int(length) * size].tobytes(), dtype=self.dtype)


# ---- utils.py ----------------------------------------------------------------------------
def normalize(weights):
    w = numpy.array(weights, dtype=numpy.float64)
    return (w / numpy.sum(w)).tolist()


def get_blend_from_list(blend):
    if blend is None:
        return None
    if len(blend) % 2 == 1:
        return [b.strip() for b in blend], None
    weights = []
    for raw in blend[0::2]:
        try:
            weights.append(float(raw))
        except ValueError:
            return [b.strip() for b in blend], None
    return [b.strip() for b in blend[1::2]], weights


# ---- blended_megatron_dataset_config.py -------------------------------------------------------
def parse_and_normalize_split(split):
    split = list(map(float, re.findall(r"[.0-9]+", split)))
    split = split + [0.0 for _ in range(3 - len(split))]
    assert len(split) == 3 and all(s >= 0.0 for s in split)
    return normalize(split)


def convert_split_vector_to_split_matrix(vector):
    expansion = functools.reduce(lambda a, b: a + [a[len(a) - 1] + b], [[0], *vector])
    matrix = []
    for lo, hi in zip(expansion[:-1], expansion[1:]):
        matrix.append(None if hi <= lo else (lo, hi))
    return matrix


# ---- gpt_dataset.py + helpers.cpp --------------------------------------------------------------
def build_sample_idx(sizes, document_index, seq_length, num_epochs, tokens_per_epoch, extra=1):
    num_samples = (num_epochs * tokens_per_epoch - extra) // seq_length
    sample_idx = numpy.zeros((num_samples + 1, 2), dtype=numpy.int64)
    index, offset = 0, 0
    sample_idx[0] = (0, 0)
    s = 1
    while s <= num_samples:
        remaining = seq_length + extra
        while remaining != 0:
            length = int(sizes[document_index[index]]) - offset
            remaining -= length
            if remaining <= 0:
                offset += remaining + length - extra
                remaining = 0
            else:
                if index == len(document_index) - 1:
                    assert s == num_samples
                    offset = int(sizes[document_index[index]]) - extra
                    break
                index += 1
                offset = 0
        sample_idx[s] = (index, offset)
        s += 1
    return sample_idx


def build_document_index(documents, num_epochs, random_state, separate_final_epoch):
    if not separate_final_epoch or num_epochs == 1:
        document_index = numpy.mgrid[0:num_epochs, 0:len(documents)][1]
        document_index[:] = documents
        document_index = document_index.reshape(-1).astype(numpy.int32)
        random_state.shuffle(document_index)
        return document_index
    first = build_document_index(documents, num_epochs - 1, random_state, False)
    last = build_document_index(documents, 1, random_state, False)
    return numpy.concatenate((first, last))


def build_shuffle_index(num_samples, total_size, random_state):
    dtype = numpy.uint32 if total_size < numpy.iinfo(numpy.uint32).max - 1 else numpy.int64
    first = numpy.arange(0, num_samples, 1, dtype=dtype)
    random_state.shuffle(first)
    if num_samples == total_size:
        return first
    last = numpy.arange(num_samples, total_size, 1, dtype=dtype)
    random_state.shuffle(last)
    return numpy.concatenate((first, last))


def unique_description(identifiers):
    text = json.dumps(identifiers, indent=4, default=lambda obj: obj.unique_identifiers)
    return text, hashlib.md5(text.encode("utf-8")).hexdigest()


def save_cache(directory, identifiers, class_name, split_name, arrays):
    text, digest = unique_description(identifiers)
    base = os.path.join(directory, "%s-%s-%s" % (digest, class_name, split_name))
    os.makedirs(directory, exist_ok=True)
    with open(base + "-description.txt", "wt") as writer:
        writer.write(text)
    for name, array in arrays:
        numpy.save(base + "-" + name + ".npy", array, allow_pickle=True)


class Tokenizer:
    """unique_identifiers of MegatronTokenizerText as build_tokenizer makes it"""

    def __init__(self, args):
        ids = collections.OrderedDict()
        ids["class"] = "megatron.core.tokenizers.text.text_tokenizer.MegatronTokenizerText"
        kind = args.tokenizer_type
        kwargs = collections.OrderedDict()
        if kind in ("BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer"):
            path = kind
            kwargs["additional_special_tokens"] = []
            if kind == "BertWordPieceCase":
                kwargs = collections.OrderedDict(
                    additional_special_tokens=["<extra_id_%d>" % i for i in range(100)])
            kwargs["vocab_file"] = args.vocab_file
            kwargs["merges_file"] = args.merge_file
            kwargs["use_fast"] = True
            kwargs["trust_remote_code"] = False
            kwargs["include_special_tokens"] = True
            kwargs["use_gigatoken"] = False
        elif kind == "NullTokenizer":
            path = None
            if args.vocab_size:
                kwargs["vocab_size"] = args.vocab_size
            kwargs["pad_id"] = -1
        elif kind == "HuggingFaceTokenizer":
            path = args.tokenizer_model
            kwargs["chat_template"] = None
            kwargs["vocab_file"] = args.vocab_file
            kwargs["merges_file"] = args.merge_file
            kwargs["additional_special_tokens"] = []
            kwargs["use_fast"] = True
            kwargs["trust_remote_code"] = False
            kwargs["include_special_tokens"] = True
            kwargs["use_gigatoken"] = False
        elif kind in ("SentencePieceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer"):
            path = args.tokenizer_model
            kwargs["chat_template"] = None
            kwargs["ignore_extra_whitespaces"] = True
            kwargs["legacy"] = False
            kwargs["special_tokens"] = None
        else:
            raise SystemExit("--write-cache: tokenizer %s is not modelled" % kind)
        ids["tokenizer_path"] = path
        for key, value in kwargs.items():
            ids[key] = str(value)
        self.unique_identifiers = ids


class GPTDataset:
    def identifiers(self, index_split):
        ids = collections.OrderedDict()
        ids["class"] = "GPTDataset"
        ids["dataset_path"] = self.path
        ids["num_samples"] = self.num_samples
        ids["index_split"] = index_split
        ids["random_seed"] = self.seed
        ids["sequence_length"] = self.seq_length
        ids["split"] = self.config["split"]
        ids["split_matrix"] = self.config["split_matrix"]
        ids["tokenizer"] = self.config["tokenizer"]
        return ids

    def save(self, directory, index_split):
        # helpers.py build_sample_idx: int32 unless a position or a length passes INT32_MAX
        widest = max(self.document_index.shape[0], self.dataset.sequence_lengths.max())
        dtype = numpy.int32 if widest <= numpy.iinfo(numpy.int32).max else numpy.int64
        save_cache(directory, self.identifiers(index_split), "GPTDataset", index_split,
                   [("document_index", self.document_index),
                    ("sample_index", self.sample_index.astype(dtype)),
                    ("shuffle_index", self.shuffle_index)])

    def __init__(self, dataset, indices, num_samples, seq_length, seed, path=None, config=None):
        self.path, self.seed, self.config = path, seed, config
        self.dataset, self.indices, self.num_samples = dataset, indices, num_samples
        self.seq_length = seq_length
        tokens_per_epoch = int(numpy.sum(dataset.sequence_lengths[indices]))
        assert tokens_per_epoch > 1, "Megatron would loop forever on a split without tokens"
        num_epochs = 1
        if num_samples is not None:
            tokens, requested = tokens_per_epoch, num_samples * seq_length + 1
            while tokens < requested:
                num_epochs += 1
                tokens += tokens_per_epoch
        if num_epochs == 1:
            separate_final_epoch = False
        else:
            sans_final = ((num_epochs - 1) * tokens_per_epoch - 1) // seq_length
            from_final = num_samples - sans_final
            per_epoch = (tokens_per_epoch - 1) // seq_length
            assert 0 <= from_final <= per_epoch + 1
            separate_final_epoch = from_final < int(0.80 * per_epoch)
        random_state = numpy.random.RandomState(seed)
        self.document_index = build_document_index(indices, num_epochs, random_state,
                                                   separate_final_epoch)
        self.sample_index = build_sample_idx(dataset.sequence_lengths, self.document_index,
                                             seq_length, num_epochs, tokens_per_epoch)
        total = self.sample_index.shape[0] - 1
        first = sans_final if separate_final_epoch else total
        self.shuffle_index = build_shuffle_index(first, total, random_state)

    def __len__(self):
        return self.sample_index.shape[0] - 1

    def __getitem__(self, idx):
        idx = self.shuffle_index[idx]
        beg, beg_offset = self.sample_index[idx]
        end, end_offset = self.sample_index[idx + 1]
        if beg == end:
            parts = [self.dataset.get(self.document_index[beg], offset=int(beg_offset),
                                      length=end_offset - beg_offset + 1)]
        else:
            parts = []
            for i in range(beg, end + 1):
                offset = 0 if i > beg else beg_offset
                length = None if i < end else end_offset + 1
                parts.append(self.dataset.get(self.document_index[i], offset=int(offset),
                                              length=length))
        text = numpy.concatenate(parts).astype(numpy.int64)
        assert len(text) == self.seq_length + 1
        return text


# ---- blended_dataset.py + helpers.cpp build_blending_indices -------------------------------------
class BlendedDataset:
    def save(self, directory, index_split):
        ids = collections.OrderedDict()
        ids["class"] = "BlendedDataset"
        ids["datasets"] = [d.identifiers(index_split) for d in self.datasets]
        ids["split"] = index_split
        ids["weights"] = self.weights
        ids["size"] = len(self.dataset_index)
        save_cache(directory, ids, "BlendedDataset", index_split,
                   [("dataset_index", self.dataset_index),
                    ("dataset_sample_index", self.dataset_sample_index)])

    def __init__(self, datasets, weights, size):
        weights = normalize(weights)
        self.weights = weights
        assert all(w > 0 for w in weights)
        self.datasets = datasets
        self.dataset_index = numpy.zeros(size, dtype=numpy.int16)
        self.dataset_sample_index = numpy.zeros(size, dtype=numpy.int64)
        current = [0] * len(datasets)
        for i in range(size):
            position = max(float(i), 1.0)
            best, best_error = 0, weights[0] * position - float(current[0])
            for d in range(1, len(datasets)):
                error = weights[d] * position - float(current[d])
                if error > best_error:
                    best, best_error = d, error
            self.dataset_index[i] = best
            self.dataset_sample_index[i] = current[best]
            current[best] += 1
        for d, count in enumerate(current):
            if count > len(datasets[d]):
                raise IndexError("blend oversamples dataset %d" % d)

    def __len__(self):
        return len(self.dataset_index)

    def __getitem__(self, idx):
        return self.datasets[self.dataset_index[idx]][self.dataset_sample_index[idx]]


# ---- blended_megatron_dataset_builder.py ----------------------------------------------------------
def sizes_per_dataset(weights, targets, surplus=0.0):
    return [[int(math.ceil(math.ceil(t * w) * (1 + surplus))) for t in targets] for w in weights]


class Builder:
    def __init__(self, seq_length, seed, sizes, only, tokenizer=None):
        # only: the split to build (each GPTDataset has its own RandomState, so the others
        # cannot change it; Megatron builds them too, and loops forever on an empty one)
        self.seq_length, self.seed, self.sizes, self.only = seq_length, seed, sizes, only
        self.low_level = {}
        self.config = {"split": None, "split_matrix": None, "tokenizer": tokenizer}

    def megatron_splits(self, prefix, split, sizes):
        if prefix not in self.low_level:
            self.low_level[prefix] = IndexedDataset(prefix)
        dataset = self.low_level[prefix]
        n = dataset.sequence_lengths.shape[0]
        out = []
        for i in range(3):
            if split[i] is None or i != self.only:
                out.append(None)
                continue
            beg = int(round(split[i][0] * float(n)))
            end = int(round(split[i][1] * float(n)))
            indices = numpy.arange(start=beg, stop=end, step=1, dtype=numpy.int32)
            out.append(GPTDataset(dataset, indices, sizes[i], self.seq_length, self.seed, prefix,
                                  self.config))
        return out

    def blend_splits(self, prefixes, weights, split, sizes):
        if weights is not None:
            weights = normalize(weights)
            target = sizes_per_dataset(weights, sizes)
            buffer = sizes_per_dataset(weights, sizes, surplus=0.005)
        else:
            buffer = [[None, None, None] for _ in prefixes]
        mid = [[], [], []]
        for p, prefix in enumerate(prefixes):
            built = self.megatron_splits(prefix, split, buffer[p])
            for i in range(3):
                mid[i].append(built[i])
        out = [None, None, None]
        for i in range(3):
            if split[i] is None or i != self.only:
                continue
            if weights is not None:
                size = sum(list(zip(*target))[i])
                out[i] = BlendedDataset(mid[i], weights, size)
            else:
                lengths = [len(d) for d in mid[i]]
                out[i] = BlendedDataset(mid[i], lengths, min(sizes[i], sum(lengths)))
        return out

    def build(self, blend, split_string, blend_per_split):
        if blend is not None:
            prefixes, weights = blend
            split = convert_split_vector_to_split_matrix(parse_and_normalize_split(split_string))
            self.config["split"], self.config["split_matrix"] = split_string, split
            if len(prefixes) == 1 and weights is None:
                return self.megatron_splits(prefixes[0], split, self.sizes)
            return self.blend_splits(prefixes, weights, split, self.sizes)
        out = [None, None, None]
        for i in range(3):
            if blend_per_split[i] is None:
                continue
            prefixes, weights = blend_per_split[i]
            spoof = [None, None, None]
            spoof[i] = (0.0, 1.0)
            sizes = [0, 0, 0]
            sizes[i] = self.sizes[i]
            if len(prefixes) == 1:
                out[i] = self.megatron_splits(prefixes[0], spoof, sizes)[i]
            else:
                out[i] = self.blend_splits(prefixes, weights, spoof, sizes)[i]
        return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--split-bounds", nargs=2)
    parser.add_argument("--seq-length", type=int)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--samples", type=int, nargs=3)
    parser.add_argument("--split", default="969, 30, 1")
    parser.add_argument("--data-path", nargs="*")
    parser.add_argument("--train-data-path", nargs="*")
    parser.add_argument("--valid-data-path", nargs="*")
    parser.add_argument("--test-data-path", nargs="*")
    parser.add_argument("--print")
    parser.add_argument("--length", action="store_true", help="print the split's length only")
    parser.add_argument("--write-cache", help="save the split's index cache here, as Megatron does")
    parser.add_argument("--tokenizer-type", default="NullTokenizer")
    parser.add_argument("--vocab-size", type=int)
    parser.add_argument("--vocab-file")
    parser.add_argument("--merge-file")
    parser.add_argument("--tokenizer-model")
    args, _ = parser.parse_known_args()  # the training flags pretrain_gpt also takes
    if args.split_bounds:
        split_string, count = args.split_bounds[0], int(args.split_bounds[1])
        matrix = convert_split_vector_to_split_matrix(parse_and_normalize_split(split_string))
        for documents in range(1, count + 1):
            words = []
            for bookend in matrix:  # _build_megatron_dataset_splits
                if bookend is None:
                    words.append("None")
                else:
                    words.append("%d-%d" % (int(round(bookend[0] * float(documents))),
                                            int(round(bookend[1] * float(documents)))))
            print("%d: %s" % (documents, " ".join(words)))
        return 0
    name, span = args.print.split(":")
    split = SPLITS.index(name)
    builder = Builder(args.seq_length, args.seed, args.samples, split, Tokenizer(args))
    if args.data_path:
        datasets = builder.build(get_blend_from_list(args.data_path), args.split, None)
    else:
        datasets = builder.build(None, None, [get_blend_from_list(args.train_data_path),
                                              get_blend_from_list(args.valid_data_path),
                                              get_blend_from_list(args.test_data_path)])
    dataset = datasets[split]
    if args.write_cache:
        if isinstance(dataset, BlendedDataset):
            for component in dataset.datasets:
                component.save(args.write_cache, name)
        dataset.save(args.write_cache, name)
    if args.length:
        print(len(dataset))
        return 0
    first, _, last = span.partition("-")
    first, last = int(first), int(last or first)
    out = sys.stdout
    for i in range(first, last + 1):
        out.write("%s %d: %s\n" % (name, i, " ".join(str(int(t)) for t in dataset[i])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
