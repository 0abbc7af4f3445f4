#!/usr/bin/env python3
"""megatron_task_samples.py: an independent reference of finetune_bert's task samples, written
from Megatron-LM's tasks/data_utils.py (clean_text, build_tokens_types_paddings_from_ids),
tasks/glue/mnli.py (MNLIDataset: columns 0, 8, 9 and the last; a 10-column header marks a test
file, labelled 'contradiction') and tasks/race/data.py (NUM_CHOICES 4, MAX_QA_LENGTH 128), with
BERT's lower-case basic tokenizer and greedy WordPiece. Prints what tests/tools/task_samples
prints: "label uid | ids | types | paddings" per row.
  megatron_task_samples.py MNLI|RACE VOCAB SEQ_LENGTH PATH...
RACE directories are read in sorted file order (task_data.h)."""
import glob
import json
import os
import re
import sys
import unicodedata

LABELS = {'contradiction': 0, 'entailment': 1, 'neutral': 2}


def clean_text(text):
    text = text.replace("\n", " ")
    text = re.sub(r'\s+', ' ', text)
    for _ in range(3):
        text = text.replace(' . ', '. ')
    return text


class WordPiece:
    def __init__(self, vocab_path):
        with open(vocab_path, encoding="utf-8") as f:
            self.vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
        self.cls, self.sep, self.pad, self.unk = (self.vocab[t] for t in ("[CLS]", "[SEP]", "[PAD]", "[UNK]"))

    @staticmethod
    def is_punct(ch):
        cp = ord(ch)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
            return True
        return unicodedata.category(ch).startswith("P")

    def basic(self, text):
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
        words = []
        for word in text.split():
            current = ""
            for ch in word:
                if self.is_punct(ch):
                    if current:
                        words.append(current)
                    words.append(ch)
                    current = ""
                else:
                    current += ch
            if current:
                words.append(current)
        return words

    def tokenize(self, text):
        ids = []
        for word in self.basic(text):
            pieces, start = [], 0
            while start < len(word):
                end, piece = len(word), None
                while start < end:
                    candidate = word[start:end] if start == 0 else "##" + word[start:end]
                    if candidate in self.vocab:
                        piece = self.vocab[candidate]
                        break
                    end -= 1
                if piece is None:
                    pieces = [self.unk]
                    break
                pieces.append(piece)
                start = end
            ids.extend(pieces)
        return ids


def build_tokens_types_paddings_from_ids(text_a_ids, text_b_ids, max_seq_length, cls_id, sep_id, pad_id):
    ids, types, paddings = [cls_id], [0], [1]
    ids.extend(text_a_ids)
    types.extend([0] * len(text_a_ids))
    paddings.extend([1] * len(text_a_ids))
    ids.append(sep_id)
    types.append(0)
    paddings.append(1)
    if text_b_ids is not None:
        ids.extend(text_b_ids)
        types.extend([1] * len(text_b_ids))
        paddings.extend([1] * len(text_b_ids))
    trimmed = False
    if len(ids) >= max_seq_length:
        ids, types, paddings = ids[:max_seq_length - 1], types[:max_seq_length - 1], paddings[:max_seq_length - 1]
        trimmed = True
    if (text_b_ids is not None) or trimmed:
        ids.append(sep_id)
        types.append(0 if text_b_ids is None else 1)
        paddings.append(1)
    padding_length = max_seq_length - len(ids)
    if padding_length > 0:
        ids.extend([pad_id] * padding_length)
        types.extend([pad_id] * padding_length)
        paddings.extend([0] * padding_length)
    return ids, types, paddings


def row(label, uid, ids, types, paddings):
    return "%d %d | %s | %s | %s" % (label, uid, " ".join(map(str, ids)), " ".join(map(str, types)),
                                     " ".join(map(str, paddings)))


def mnli(tok, seq_length, filename, out):
    first, is_test = True, False
    with open(filename, 'r') as f:
        for line in f:
            r = line.strip().split('\t')
            if first:
                first = False
                is_test = len(r) == 10
                continue
            text_a, text_b = clean_text(r[8].strip()), clean_text(r[9].strip())
            uid, label = int(r[0].strip()), ('contradiction' if is_test else r[-1].strip())
            ids, types, paddings = build_tokens_types_paddings_from_ids(
                tok.tokenize(text_a), tok.tokenize(text_b), seq_length, tok.cls, tok.sep, tok.pad)
            out.append(row(LABELS[label], uid, ids, types, paddings))


def race(tok, seq_length, datapath, out):
    counter = [0]  # process_single_datapath's num_samples
    for filename in sorted(glob.glob(os.path.join(datapath, '*.txt'))):
        with open(filename, 'r') as f:
            for line in f:
                data = json.loads(line)
                context_ids = tok.tokenize(clean_text(data["article"]))
                for qi, question in enumerate(data["questions"]):
                    label = ord(data["answers"][qi]) - ord("A")
                    for choice in data["options"][qi]:
                        qa = question.replace("_", choice) if "_" in question else " ".join([question, choice])
                        qa_ids = tok.tokenize(clean_text(qa))[:128]
                        ids, types, paddings = build_tokens_types_paddings_from_ids(
                            qa_ids, context_ids, seq_length, tok.cls, tok.sep, tok.pad)
                        out.append(row(label, counter[0], ids, types, paddings))
                    counter[0] += 1


def main():
    task, vocab, seq_length, paths = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    tok, out = WordPiece(vocab), []
    for path in paths:
        if task == "MNLI":
            mnli(tok, seq_length, path, out)
        else:
            race(tok, seq_length, path, out)
    print("\n".join(out))


if __name__ == "__main__":
    main()
