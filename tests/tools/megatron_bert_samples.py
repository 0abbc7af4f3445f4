#!/usr/bin/env python3
"""megatron_bert_samples.py: an independent reference for the training samples of Megatron-Core's
BERT dataset, written step by step after megatron/core/datasets/bert_dataset.py
(BERTMaskedWordPieceDataset.__getitem__, _get_token_mask), masked_dataset.py
(_build_sample_index, _create_masked_lm_predictions) and helpers.cpp (build_mapping_impl,
get_target_sample_len, with std::mt19937 and std::mt19937_64 written out below), with
numpy.random.RandomState, over Megatron .bin/.idx corpora, with the configuration
examples/bert/pretrain_bert.py passes (masking_max_ngram 3, whole words, no permutation, no
geometric N). Splits and blends are BlendedMegatronDatasetBuilder's, shared with the GPT
reference (megatron_gpt_samples.py). The vocabulary is that of megatron.core.tokenizers'
BertWordPiece types: Hugging Face's BertTokenizer load_vocab over --vocab-file (plus the 100
<extra_id_i> for BertWordPieceCase). Prints samples in the format of tests/tools/bert_samples:
    SPLIT I: text ... | types ... | labels ... | padding ... | loss ... | is_random R truncated T
Usage:
  megatron_bert_samples.py --seq-length S --seed N --samples TRAIN VALID TEST --split 969,30,1
      --vocab-file VOCAB [--tokenizer-type BertWordPieceLowerCase] [--mask-prob 0.15]
      [--short-seq-prob 0.1] [--bert-no-binary-head] --print SPLIT:I-J
      (--data-path WORDS... | --train-data-path ... --valid-data-path ...) [--write-cache DIR]
With --write-cache DIR it also saves the index cache of the printed split as Megatron-Core does:
<md5>-BERTMaskedWordPieceDataset-{description.txt,sample_index.npy} per corpus (the description
megatron_dataset.py's unique_description with masked_dataset.py's and bert_dataset.py's key
attributes, the split left out of the names) and the BlendedDataset's files for a blend.
"""
import argparse
import collections
import os
import struct
import sys

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_gpt_samples as gpt  # noqa: E402  (splits, blends, the .idx reader)

LONG_SENTENCE_LEN = 512


# ---- std::mt19937 and std::mt19937_64 (the C++ standard's engines, as helpers.cpp uses them) --
class MT19937:
    def __init__(self, seed):
        self.mt = [0] * 624
        self.mt[0] = seed & 0xFFFFFFFF
        for i in range(1, 624):
            prev = self.mt[i - 1]
            self.mt[i] = (1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF
        self.index = 624

    def __call__(self):
        if self.index == 624:
            mt = self.mt
            for i in range(624):
                y = (mt[i] & 0x80000000) | (mt[(i + 1) % 624] & 0x7FFFFFFF)
                mt[i] = mt[(i + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        return y & 0xFFFFFFFF


class MT19937_64:
    MASK = (1 << 64) - 1

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & self.MASK
        for i in range(1, 312):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & self.MASK
        self.index = 312

    def __call__(self):
        if self.index == 312:
            mt = self.mt
            for i in range(312):
                y = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
                mt[i] = mt[(i + 156) % 312] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
            self.index = 0
        x = self.mt[self.index]
        self.index += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        x ^= x >> 43
        return x & self.MASK


def check_engines():
    """the standard's required values: the 10000th output of a default-seeded engine"""
    g32, g64 = MT19937(5489), MT19937_64(5489)
    for _ in range(9999):
        g32(), g64()
    assert g32() == 4123659995 and g64() == 9981545732273789042, "mt19937 engines are wrong"


# ---- helpers.cpp build_mapping ----------------------------------------------------------------
def get_target_sample_len(short_seq_ratio, max_length, rand32_gen):
    if short_seq_ratio == 0:
        return max_length
    random_number = rand32_gen()
    if (random_number % short_seq_ratio) == 0:
        return 2 + random_number % (max_length - 1)
    return max_length


def build_mapping(docs, sizes, num_epochs, max_num_samples, max_seq_length, short_seq_prob, seed,
                  min_num_sent):
    assert max_num_samples is not None, "helpers.build_mapping takes no None (a uint64_t)"
    assert num_epochs > 0 and max_seq_length > 1 and 0.0 <= short_seq_prob <= 1.0 and seed > 0
    short_seq_ratio = 0
    if short_seq_prob > 0:
        short_seq_ratio = int(round(1.0 / short_seq_prob))
    maps = []
    rand32_gen = MT19937(seed)  # one pass: the second of helpers.cpp repeats the first
    for epoch in range(num_epochs):
        if len(maps) >= max_num_samples:
            break
        before = len(maps)
        for doc in range(len(docs) - 1):
            sent_index_first, sent_index_last = int(docs[doc]), int(docs[doc + 1])
            prev_start_index = sent_index_first
            num_remain_sent = sent_index_last - sent_index_first
            contains_long_sentence = False
            if num_remain_sent > 1:
                for sent_index in range(sent_index_first, sent_index_last):
                    if sizes[sent_index] > LONG_SENTENCE_LEN:
                        contains_long_sentence = True
                        break
            if num_remain_sent >= min_num_sent and not contains_long_sentence:
                seq_len, num_sent = 0, 0
                target_seq_len = get_target_sample_len(short_seq_ratio, max_seq_length, rand32_gen)
                for sent_index in range(sent_index_first, sent_index_last):
                    seq_len += int(sizes[sent_index])
                    num_sent += 1
                    num_remain_sent -= 1
                    if ((seq_len >= target_seq_len and num_remain_sent > 1
                         and num_sent >= min_num_sent) or num_remain_sent == 0):
                        maps.append((prev_start_index, sent_index + 1, target_seq_len))
                        prev_start_index = sent_index + 1
                        target_seq_len = get_target_sample_len(short_seq_ratio, max_seq_length,
                                                               rand32_gen)
                        seq_len, num_sent = 0, 0
        if len(maps) == before:
            raise SystemExit("an epoch yields no sample (Megatron would loop for 2^31 epochs)")
    rand64_gen = MT19937_64(seed + 1)
    for i in range(len(maps) - 1, 0, -1):
        j = rand64_gen() % (i + 1)
        maps[i], maps[j] = maps[j], maps[i]
    dtype = numpy.uint64 if len(sizes) > numpy.iinfo(numpy.uint32).max else numpy.uint32
    return numpy.array(maps, dtype=dtype).reshape(-1, 3)


# ---- the tokenizer as the dataset reads it --------------------------------------------------------
class Tokenizer:
    def __init__(self, vocab_file, tokenizer_type):
        vocab = collections.OrderedDict()  # transformers' BertTokenizer load_vocab
        with open(vocab_file, "r", encoding="utf-8") as reader:
            tokens = reader.readlines()
        for index, token in enumerate(tokens):
            token = token.rstrip("\n")
            vocab[token] = index
        if tokenizer_type == "BertWordPieceCase":  # build_tokenizer's additional special tokens
            for i in range(100):
                vocab.setdefault("<extra_id_%d>" % i, len(vocab))
        self.inv_vocab = {v: k for k, v in vocab.items()}
        self.cls, self.sep = vocab["[CLS]"], vocab["[SEP]"]
        self.mask, self.pad = vocab["[MASK]"], vocab["[PAD]"]


class IndexedDataset(gpt.IndexedDataset):
    """adds the document indices (sentence index where each document starts, then the count)"""

    def __init__(self, prefix):
        super().__init__(prefix)
        with open(prefix + ".idx", "rb") as f:
            f.seek(9 + 8 + 1)
            sequence_count, document_count = struct.unpack("<QQ", f.read(16))
            f.seek(9 + 8 + 1 + 16 + 12 * sequence_count)
            self.document_indices = numpy.frombuffer(f.read(8 * document_count), dtype=numpy.int64)

    def __getitem__(self, idx):
        return self.get(idx)


# ---- bert_dataset.py + masked_dataset.py ------------------------------------------------------------
class BERTMaskedWordPieceDataset:
    def identifiers(self, index_split):
        ids = collections.OrderedDict()
        ids["class"] = "BERTMaskedWordPieceDataset"
        ids["dataset_path"] = self.path
        ids["num_samples"] = self.num_samples
        ids["index_split"] = index_split
        ids["random_seed"] = self.config.random_seed
        ids["sequence_length"] = self.config.sequence_length
        ids["split"] = self.builder_config["split"]
        ids["split_matrix"] = self.builder_config["split_matrix"]
        ids["tokenizer"] = self.builder_config["tokenizer"]
        ids["masking_probability"] = self.config.masking_probability
        ids["short_sequence_probability"] = self.config.short_sequence_probability
        ids["masking_max_ngram"] = self.config.masking_max_ngram
        ids["masking_do_full_word"] = self.config.masking_do_full_word
        ids["masking_do_permutation"] = False
        ids["masking_use_longer_ngrams"] = False
        ids["masking_use_geometric_distribution"] = False
        ids["classification_head"] = self.config.classification_head
        return ids

    def save(self, directory, index_split):
        # masked_dataset.py: <md5>-BERTMaskedWordPieceDataset-<suffix>, no split in the name
        text, digest = gpt.unique_description(self.identifiers(index_split))
        base = os.path.join(directory, "%s-BERTMaskedWordPieceDataset" % digest)
        os.makedirs(directory, exist_ok=True)
        with open(base + "-description.txt", "wt") as writer:
            writer.write(text)
        numpy.save(base + "-sample_index.npy", self.sample_index, allow_pickle=True)

    def __init__(self, dataset, indices, num_samples, config, path=None, builder_config=None):
        self.dataset, self.indices, self.num_samples, self.config = dataset, indices, num_samples, config
        self.path, self.builder_config = path, builder_config
        self.token_lookup = sorted(config.tokenizer.inv_vocab.keys())
        self._pad_token_id = config.tokenizer.pad
        num_epochs = numpy.iinfo(numpy.int32).max - 1 if num_samples is not None else 1
        indices = numpy.append(self.indices, self.indices[-1] + 1)
        self.sample_index = build_mapping(
            self.dataset.document_indices[indices], self.dataset.sequence_lengths, num_epochs,
            self.num_samples, config.sequence_length - 3, config.short_sequence_probability,
            config.random_seed, 2 if config.classification_head else 1)

    def __len__(self):
        return self.sample_index.shape[0]

    def __getitem__(self, idx):
        idx_beg, idx_end, target_sequence_length = self.sample_index[idx]
        sample = [self.dataset[i] for i in range(idx_beg, idx_end)]
        numpy_random_state = numpy.random.RandomState(seed=(self.config.random_seed + idx) % 2**32)
        assert target_sequence_length <= self.config.sequence_length
        pivot = len(sample)
        is_next_random = False
        if self.config.classification_head:
            assert len(sample) > 1, "the sample must contain at least two sentences"
            pivot = 1
            if len(sample) >= 3:
                pivot = numpy_random_state.randint(low=1, high=len(sample))
            is_next_random = numpy_random_state.random() < 0.5
        split_A = []
        for sample_a in sample[:pivot]:
            split_A.extend(sample_a)
        split_B = []
        for sample_b in sample[pivot:]:
            split_B.extend(sample_b)
        if is_next_random:
            split_A, split_B = split_B, split_A
        length_A, length_B = len(split_A), len(split_B)
        if length_A + length_B <= target_sequence_length:
            truncated = False
        else:
            while length_A + length_B > target_sequence_length:
                split = split_A if length_A > length_B else split_B
                if numpy_random_state.random() < 0.5:
                    del split[0]
                else:
                    del split[-1]
                length_A, length_B = len(split_A), len(split_B)
            truncated = True
        tokenizer = self.config.tokenizer
        tokens = [tokenizer.cls, *split_A, tokenizer.sep]
        assignments = [0 for _ in range(1 + len(split_A) + 1)]
        if split_B:
            tokens += [*split_B, tokenizer.sep]
            assignments += [1 for _ in range(len(split_B) + 1)]
        tokens, masked_positions, masked_labels = self._create_masked_lm_predictions(
            tokens, target_sequence_length, numpy_random_state)
        length_toks = len(tokens)
        length_pads = self.config.sequence_length - length_toks
        assert length_pads >= 0
        tokens = numpy.array(tokens, dtype=numpy.int64)
        tokens = numpy.pad(tokens, (0, length_pads), constant_values=self._pad_token_id)
        assignments = numpy.array(assignments, dtype=numpy.int64)
        assignments = numpy.pad(assignments, (0, length_pads), constant_values=self._pad_token_id)
        mask_pads = numpy.ones(self.config.sequence_length, dtype=numpy.int64)
        mask_pads[tokens == self._pad_token_id] = self._pad_token_id
        labels = numpy.zeros(self.config.sequence_length, dtype=numpy.int64) - 1
        labels[masked_positions] = masked_labels
        mask_loss = numpy.zeros(self.config.sequence_length, dtype=numpy.int64)
        mask_loss[masked_positions] = 1
        tokens[tokens == self._pad_token_id] = 0
        labels[labels == self._pad_token_id] = 0
        return {"text": tokens, "types": assignments, "labels": labels,
                "is_random": int(is_next_random), "padding_mask": mask_pads,
                "loss_mask": mask_loss, "truncated": int(truncated)}

    def _get_token_mask(self, numpy_random_state):
        if numpy_random_state.random() < 0.8:
            return self.config.tokenizer.mask
        else:
            if numpy_random_state.random() >= 0.5:
                return self.token_lookup[numpy_random_state.randint(0, len(self.token_lookup))]
        return None

    def _create_masked_lm_predictions(self, token_ids, target_sequence_length, numpy_random_state):
        config = self.config
        candidates = []
        for i, token_id in enumerate(token_ids):
            if token_id == config.tokenizer.cls or token_id == config.tokenizer.sep:
                continue
            if not config.tokenizer.inv_vocab[token_id].startswith("##"):
                candidates.append([i])
            elif config.masking_do_full_word and len(candidates) > 0:
                candidates[-1].append(i)
            else:
                candidates.append([i])
        n_maskings = min(config.masking_probability * target_sequence_length,
                         max(1, int(round(len(token_ids) * config.masking_probability))))
        ngram_nvals = numpy.arange(config.masking_max_ngram, dtype=numpy.int64) + 1
        nprobs = 1.0 / ngram_nvals
        nprobs = nprobs / nprobs.sum(keepdims=True)
        candidate_ngrams = [[candidates[idx:idx + n] for n in ngram_nvals]
                            for idx in range(len(candidates))]
        numpy_random_state.shuffle(candidate_ngrams)
        masked_token_ids = list(token_ids)
        masked_positions_and_labels = []
        masked_indices = set()
        for candidate_idx in range(len(candidate_ngrams)):
            n_ngrams = len(candidate_ngrams[candidate_idx])
            if len(masked_positions_and_labels) >= n_maskings:
                break
            if not candidate_ngrams[candidate_idx]:
                continue
            p = nprobs[:n_ngrams] / nprobs[:n_ngrams].sum(keepdims=True)
            n = numpy_random_state.choice(ngram_nvals[:n_ngrams], p=p)
            while True:
                ngram_indices = sum(candidate_ngrams[candidate_idx][n - 1], [])
                n = n - 1
                if n_maskings >= len(masked_positions_and_labels) + len(ngram_indices):
                    skip_candidate = False
                    break
                if n == 0:
                    skip_candidate = True
                    break
            if skip_candidate:
                continue
            if any(map(lambda idx: idx in masked_indices, ngram_indices)):
                continue
            for index in ngram_indices:
                masked_indices.add(index)
                mask = self._get_token_mask(numpy_random_state)
                if mask is None:
                    masked_token_ids[index] = token_ids[index]
                else:
                    masked_token_ids[index] = mask
                masked_positions_and_labels.append((index, token_ids[index]))
        assert len(masked_positions_and_labels) <= n_maskings
        masked_positions_and_labels = sorted(masked_positions_and_labels, key=lambda x: x[0])
        return (masked_token_ids, [p for p, _ in masked_positions_and_labels],
                [label for _, label in masked_positions_and_labels])


class Config:
    def __init__(self, args):
        self.random_seed = args.seed
        self.sequence_length = args.seq_length
        self.tokenizer = Tokenizer(args.vocab_file, args.tokenizer_type)
        self.masking_probability = args.mask_prob
        self.short_sequence_probability = args.short_seq_prob
        self.masking_max_ngram = 3
        self.masking_do_full_word = True
        self.classification_head = not args.bert_no_binary_head


class Builder(gpt.Builder):
    """BlendedMegatronDatasetBuilder over BERT datasets: the split is over documents"""

    def __init__(self, config, sizes, only, tokenizer):
        super().__init__(config.sequence_length, config.random_seed, sizes, only, tokenizer)
        self.bert_config = config

    def megatron_splits(self, prefix, split, sizes):
        if prefix not in self.low_level:
            self.low_level[prefix] = IndexedDataset(prefix)
        dataset = self.low_level[prefix]
        n = dataset.document_indices.shape[0] - 1  # numel_low_level_dataset
        out = []
        for i in range(3):
            if split[i] is None or i != self.only:
                out.append(None)
                continue
            beg = int(round(split[i][0] * float(n)))
            end = int(round(split[i][1] * float(n)))
            indices = numpy.arange(start=beg, stop=end, step=1, dtype=numpy.int32)
            out.append(BERTMaskedWordPieceDataset(dataset, indices, sizes[i], self.bert_config,
                                                  prefix, self.config))
        return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq-length", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--samples", type=int, nargs=3, required=True)
    parser.add_argument("--split", default="969, 30, 1")
    parser.add_argument("--data-path", nargs="*")
    parser.add_argument("--train-data-path", nargs="*")
    parser.add_argument("--valid-data-path", nargs="*")
    parser.add_argument("--test-data-path", nargs="*")
    parser.add_argument("--vocab-file", required=True)
    parser.add_argument("--tokenizer-type", default="BertWordPieceLowerCase")
    parser.add_argument("--mask-prob", type=float, default=0.15)
    parser.add_argument("--short-seq-prob", type=float, default=0.1)
    parser.add_argument("--bert-no-binary-head", action="store_true")
    parser.add_argument("--print", required=True)
    parser.add_argument("--length", action="store_true", help="print the split's length only")
    parser.add_argument("--write-cache", help="save the split's index cache here, as Megatron does")
    args, _ = parser.parse_known_args()
    args.merge_file, args.tokenizer_model, args.vocab_size = None, None, None
    check_engines()
    name, span = args.print.split(":")
    split = gpt.SPLITS.index(name)
    builder = Builder(Config(args), args.samples, split, gpt.Tokenizer(args))
    if args.data_path:
        datasets = builder.build(gpt.get_blend_from_list(args.data_path), args.split, None)
    else:
        datasets = builder.build(None, None, [gpt.get_blend_from_list(args.train_data_path),
                                              gpt.get_blend_from_list(args.valid_data_path),
                                              gpt.get_blend_from_list(args.test_data_path)])
    dataset = datasets[split]
    if args.write_cache:
        if isinstance(dataset, gpt.BlendedDataset):
            for component in dataset.datasets:
                component.save(args.write_cache, name)
        dataset.save(args.write_cache, name)
    if args.length:
        print(len(dataset))
        return 0
    first, _, last = span.partition("-")
    first, last = int(first), int(last or first)
    out = sys.stdout
    join = lambda a: " ".join(str(int(t)) for t in a)
    for i in range(first, last + 1):
        s = dataset[i]
        out.write("%s %d: text %s | types %s | labels %s | padding %s | loss %s | is_random %d "
                  "truncated %d\n" % (name, i, join(s["text"]), join(s["types"]), join(s["labels"]),
                                      join(s["padding_mask"]), join(s["loss_mask"]),
                                      s["is_random"], s["truncated"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
