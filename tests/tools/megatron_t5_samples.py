#!/usr/bin/env python3
"""megatron_t5_samples.py: an independent reference for the training samples of Megatron-Core's
T5 dataset, written step by step after megatron/core/datasets/t5_dataset.py
(T5MaskedWordPieceDataset.__init__, __getitem__, _get_token_mask, _build_b1ss_attention_mask)
and masked_dataset.py (_build_sample_index, _create_masked_lm_predictions) with
numpy.random.RandomState, over Megatron .bin/.idx corpora, with the configuration
examples/t5/pretrain_t5.py passes (masking_max_ngram 10, whole words, no permutation, the
geometric N of SpanBERT). The sample index is helpers.cpp's build_mapping (shared with the BERT
reference, megatron_bert_samples.py), splits and blends BlendedMegatronDatasetBuilder's (the GPT
reference). The tokenizer is megatron.core.tokenizers' BertWordPieceCase: Hugging Face's
BertTokenizer over --vocab-file plus the 100 <extra_id_i> of build_tokenizer (the
additional_special_tokens, the sentinels), bos = [CLS] and eos = [SEP] as HuggingFaceTokenizer
sets them for a tokenizer that has neither. Prints samples in the format of tests/tools/t5_samples:
    SPLIT I: text_enc ... | text_dec ... | labels ... | loss_mask ... | enc_mask ... |
    dec_mask ... | truncated T [| enc_attn ROWS | dec_attn ROWS | enc_dec_attn ROWS]
Usage:
  megatron_t5_samples.py --encoder-seq-length E --decoder-seq-length D --seed N
      --samples TRAIN VALID TEST --split 969,30,1 --vocab-file VOCAB [--mask-prob 0.15]
      [--short-seq-prob 0.1] --print SPLIT:I-J [--attention-masks] [--length]
      (--data-path WORDS... | --train-data-path ... --valid-data-path ...) [--write-cache DIR]
"""
import argparse
import collections
import os
import sys
from collections import deque

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_bert_samples as bert  # noqa: E402  (build_mapping, the .idx documents)
import megatron_gpt_samples as gpt  # noqa: E402  (splits, blends, cache descriptions)


class Tokenizer(bert.Tokenizer):
    def __init__(self, vocab_file, tokenizer_type):
        if tokenizer_type != "BertWordPieceCase":
            raise SystemExit("T5 needs additional_special_tokens: BertWordPieceCase")
        super().__init__(vocab_file, tokenizer_type)
        vocab = {v: k for k, v in self.inv_vocab.items()}
        self.bos, self.eos = self.cls, self.sep
        self.additional_special_tokens_ids = [vocab["<extra_id_%d>" % i] for i in range(100)]


class T5MaskedWordPieceDataset:
    def identifiers(self, index_split):
        ids = collections.OrderedDict()
        ids["class"] = "T5MaskedWordPieceDataset"
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
        ids["masking_do_permutation"] = self.config.masking_do_permutation
        ids["masking_use_longer_ngrams"] = self.config.masking_use_longer_ngrams
        ids["masking_use_geometric_distribution"] = self.config.masking_use_geometric_distribution
        ids["sequence_length_decoder"] = self.config.sequence_length_decoder
        return ids

    def save(self, directory, index_split):
        text, digest = gpt.unique_description(self.identifiers(index_split))
        base = os.path.join(directory, "%s-T5MaskedWordPieceDataset" % digest)
        os.makedirs(directory, exist_ok=True)
        with open(base + "-description.txt", "wt") as writer:
            writer.write(text)
        numpy.save(base + "-sample_index.npy", self.sample_index, allow_pickle=True)

    def __init__(self, dataset, indices, num_samples, config, path=None, builder_config=None):
        self.dataset, self.indices, self.num_samples, self.config = dataset, indices, num_samples, config
        self.path, self.builder_config = path, builder_config
        self._pad_token_id = config.tokenizer.pad
        num_epochs = numpy.iinfo(numpy.int32).max - 1 if num_samples is not None else 1
        indices = numpy.append(self.indices, self.indices[-1] + 1)
        # Account for the single <bos> and single <eos> token ids
        self.sample_index = bert.build_mapping(
            self.dataset.document_indices[indices], self.dataset.sequence_lengths, num_epochs,
            self.num_samples, config.sequence_length - 2, config.short_sequence_probability,
            config.random_seed, 1)

    def __len__(self):
        return self.sample_index.shape[0]

    def __getitem__(self, idx):
        idx_beg, idx_end, target_sequence_length = self.sample_index[idx]
        sample = [self.dataset[i] for i in range(idx_beg, idx_end)]
        numpy_random_state = numpy.random.RandomState(seed=(self.config.random_seed + idx) % 2**32)
        assert target_sequence_length <= self.config.sequence_length
        tokens = [token for sentence in sample for token in sentence]
        truncated = len(tokens) > target_sequence_length
        tokens = tokens[:target_sequence_length]
        (tokens, _, _, _, masked_spans) = self._create_masked_lm_predictions(
            tokens, target_sequence_length, numpy_random_state)
        sentinels = deque(self.config.tokenizer.additional_special_tokens_ids)
        encoder_input = []
        decoder_input = [self.config.tokenizer.bos]
        decoder_output = []
        idx_beg = 0
        for indices, labels in masked_spans:
            sentinel = sentinels.popleft()
            idx_end = indices[0]
            encoder_input.extend(tokens[idx_beg:idx_end])
            encoder_input.append(sentinel)
            decoder_input.append(sentinel)
            decoder_input.extend(labels)
            decoder_output.append(sentinel)
            decoder_output.extend(labels)
            idx_beg = indices[-1] + 1
        encoder_input.extend(tokens[idx_beg:])
        decoder_output.append(self.config.tokenizer.eos)
        length_toks_encoder = len(encoder_input)
        length_toks_decoder = len(decoder_input)
        length_pads_encoder = self.config.sequence_length_encoder - length_toks_encoder
        length_pads_decoder = self.config.sequence_length_decoder - length_toks_decoder
        assert length_pads_encoder >= 0
        assert length_pads_decoder >= 0
        encoder_input = numpy.array(encoder_input, dtype=numpy.int64)
        encoder_input = numpy.pad(encoder_input, (0, length_pads_encoder),
                                  constant_values=self._pad_token_id)
        decoder_input = numpy.array(decoder_input, dtype=numpy.int64)
        decoder_input = numpy.pad(decoder_input, (0, length_pads_decoder),
                                  constant_values=self._pad_token_id)
        mask_encoder = numpy.ones(self.config.sequence_length_encoder, dtype=numpy.int64)
        mask_encoder[encoder_input == self._pad_token_id] = 0
        mask_decoder = numpy.ones(self.config.sequence_length_decoder, dtype=numpy.int64)
        mask_decoder[decoder_input == self._pad_token_id] = 0
        decoder_output = numpy.array(decoder_output, dtype=numpy.int64)
        decoder_output = numpy.pad(decoder_output, (0, length_pads_decoder), constant_values=-1)
        loss_mask = numpy.zeros(self.config.sequence_length_decoder, dtype=numpy.int64)
        loss_mask[:length_toks_decoder] = 1
        encoder_input[encoder_input == self._pad_token_id] = 0
        decoder_input[decoder_input == self._pad_token_id] = 0
        decoder_output[decoder_output == self._pad_token_id] = 0
        return {"text_enc": encoder_input, "text_dec": decoder_input, "labels": decoder_output,
                "loss_mask": loss_mask, "truncated": int(truncated), "enc_mask": mask_encoder,
                "dec_mask": mask_decoder}

    def _get_token_mask(self, numpy_random_state):
        return self.config.tokenizer.mask

    def _create_masked_lm_predictions(self, token_ids, target_sequence_length, numpy_random_state):
        config = self.config
        boundaries = []
        candidates = []
        for i, token_id in enumerate(token_ids):
            if token_id == config.tokenizer.cls or token_id == config.tokenizer.sep:
                boundaries.append(1)
            else:
                if not config.tokenizer.inv_vocab[token_id].startswith("##"):
                    boundaries.append(1)
                    candidates.append([i])
                else:
                    boundaries.append(0)
                    if config.masking_do_full_word and len(candidates) > 0:
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
        masked_spans = []
        masked_indices = set()
        for candidate_idx in range(len(candidate_ngrams)):
            n_ngrams = len(candidate_ngrams[candidate_idx])
            if len(masked_positions_and_labels) >= n_maskings:
                break
            if not candidate_ngrams[candidate_idx]:
                continue
            if config.masking_use_geometric_distribution:
                p = 0.2
                n = min(numpy_random_state.geometric(p), config.masking_max_ngram)
            else:
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
            masked_spans.append((ngram_indices, [token_ids[index] for index in ngram_indices]))
        assert len(masked_positions_and_labels) <= n_maskings
        numpy_random_state.shuffle(candidate_ngrams)
        masked_positions_and_labels = sorted(masked_positions_and_labels, key=lambda x: x[0])
        masked_spans = sorted(masked_spans, key=lambda x: x[0][0])
        return (masked_token_ids, [p for p, _ in masked_positions_and_labels],
                [label for _, label in masked_positions_and_labels], boundaries, masked_spans)


def build_b1ss_attention_mask(source_sample, target_sample, make_history_mask=False):
    """_build_b1ss_attention_mask for one sample, in numpy (True: masked)"""
    mask = (target_sample[None, :] >= 1) * (source_sample[:, None] >= 1)
    if make_history_mask:
        arange = numpy.arange(source_sample.shape[0])
        history_mask = arange[None, ] <= arange[:, None]
        mask = mask * history_mask
    return ~mask


class Config:
    def __init__(self, args):
        self.random_seed = args.seed
        self.sequence_length = args.encoder_seq_length
        self.sequence_length_encoder = args.encoder_seq_length
        self.sequence_length_decoder = args.decoder_seq_length
        self.tokenizer = Tokenizer(args.vocab_file, args.tokenizer_type)
        self.masking_probability = args.mask_prob
        self.short_sequence_probability = args.short_seq_prob
        self.masking_max_ngram = 10
        self.masking_do_full_word = True
        self.masking_do_permutation = False
        self.masking_use_longer_ngrams = False
        self.masking_use_geometric_distribution = True
        assert len(self.tokenizer.additional_special_tokens_ids) > 0


class Builder(gpt.Builder):
    """BlendedMegatronDatasetBuilder over T5 datasets: the split is over documents"""

    def __init__(self, config, sizes, only, tokenizer):
        super().__init__(config.sequence_length, config.random_seed, sizes, only, tokenizer)
        self.t5_config = config

    def megatron_splits(self, prefix, split, sizes):
        if prefix not in self.low_level:
            self.low_level[prefix] = bert.IndexedDataset(prefix)
        dataset = self.low_level[prefix]
        n = dataset.document_indices.shape[0] - 1
        out = []
        for i in range(3):
            if split[i] is None or i != self.only:
                out.append(None)
                continue
            beg = int(round(split[i][0] * float(n)))
            end = int(round(split[i][1] * float(n)))
            indices = numpy.arange(start=beg, stop=end, step=1, dtype=numpy.int32)
            out.append(T5MaskedWordPieceDataset(dataset, indices, sizes[i], self.t5_config,
                                                prefix, self.config))
        return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--encoder-seq-length", type=int, required=True)
    parser.add_argument("--decoder-seq-length", type=int, required=True)
    parser.add_argument("--vocab-extra-ids", type=int, default=0)  # changes nothing in Megatron
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--samples", type=int, nargs=3, required=True)
    parser.add_argument("--split", default="969, 30, 1")
    parser.add_argument("--data-path", nargs="*")
    parser.add_argument("--train-data-path", nargs="*")
    parser.add_argument("--valid-data-path", nargs="*")
    parser.add_argument("--test-data-path", nargs="*")
    parser.add_argument("--vocab-file", required=True)
    parser.add_argument("--tokenizer-type", default="BertWordPieceCase")
    parser.add_argument("--mask-prob", type=float, default=0.15)
    parser.add_argument("--short-seq-prob", type=float, default=0.1)
    parser.add_argument("--print", required=True)
    parser.add_argument("--attention-masks", action="store_true")
    parser.add_argument("--length", action="store_true", help="print the split's length only")
    parser.add_argument("--write-cache", help="save the split's index cache here, as Megatron does")
    args = parser.parse_args()
    args.merge_file, args.tokenizer_model, args.vocab_size = None, None, None
    bert.check_engines()
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
    join = lambda a: " ".join(str(int(t)) for t in a)
    rows = lambda m: " ".join("".join("1" if x else "0" for x in row) for row in m)
    for i in range(first, last + 1):
        s = dataset[i]
        line = "%s %d: text_enc %s | text_dec %s | labels %s | loss_mask %s | enc_mask %s | " \
               "dec_mask %s | truncated %d" % (name, i, join(s["text_enc"]), join(s["text_dec"]),
                                               join(s["labels"]), join(s["loss_mask"]),
                                               join(s["enc_mask"]), join(s["dec_mask"]),
                                               s["truncated"])
        if args.attention_masks:
            enc, dec = s["text_enc"], s["text_dec"]
            line += " | enc_attn %s | dec_attn %s | enc_dec_attn %s" % (
                rows(build_b1ss_attention_mask(enc, enc)),
                rows(build_b1ss_attention_mask(dec, dec, make_history_mask=True)),
                rows(build_b1ss_attention_mask(dec, enc)))
        sys.stdout.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
