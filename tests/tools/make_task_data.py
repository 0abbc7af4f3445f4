#!/usr/bin/env python3
"""make_task_data.py: writes the small synthetic fine-tuning sets of tests/data (run from the top of
the tree; deterministic: the same files every run). Words come from tests/data/wordpiece-vocab.txt.

MNLI (GLUE TSV, the 12 columns of MNLI's train.tsv; Megatron reads 0, 8, 9 and the last):
  sentence1: 5 distinct words of WORDS; sentence2: 5 words (3 after "don't"), and the label by
  word overlap:
  entailment    every word of sentence2 is in sentence1
  neutral       no word of sentence2 is in sentence1 (words of OTHER)
  contradiction "don't" then words of sentence1
RACE (one JSON passage a line): an article of 4 to 6 words of WORDS, two questions, the right option
  the one word of the article among 4, the others from OTHER ("_" in one question, appended in the
  other).
"""
import json
import random

WORDS = "quick brown fox jump over lazy dog".split()      # sentence 1, articles
OTHER = "hello world cafe naive data token".split()        # never in sentence 1 or an article
LABELS = ["contradiction", "entailment", "neutral"]


def mnli_rows(rng, count, first_id):
    rows = []
    for i in range(count):
        s1 = rng.sample(WORDS, 5)
        label = LABELS[i % 3]
        k = 3 if label == "contradiction" else 5
        if label == "neutral":
            s2 = rng.sample(OTHER, k)
        else:
            s2 = rng.sample(s1, k)
            if label == "contradiction":
                s2 = ["don't"] + s2
        a, b = " ".join(s1) + " .", " ".join(s2) + " ."
        uid = first_id + i
        rows.append([str(uid), str(uid // 3), str(uid) + "e", "synthetic", "( " + a + " )", "( " + b + " )",
                     "(ROOT " + a + ")", "(ROOT " + b + ")", a, b, label, label])
    return rows


def write_mnli(path, rows):
    header = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
              "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"]
    with open(path, "w") as f:
        for row in [header] + rows:
            f.write("\t".join(row) + "\n")


def race_passages(rng, count):
    lines = []
    for _ in range(count):
        article = rng.sample(WORDS, rng.randint(4, 6))
        others = OTHER
        questions, options, answers = [], [], []
        for q in range(2):
            right = rng.choice(article)
            choice = rng.sample(others, 3)
            slot = rng.randrange(4)
            choice.insert(slot, right)
            questions.append("the _ is it ?" if q == 0 else "which is it ?")
            options.append(choice)
            answers.append("ABCD"[slot])
        lines.append(json.dumps({"article": " ".join(article) + " .", "questions": questions,
                                 "options": options, "answers": answers, "id": "synthetic"}))
    return lines


def main():
    rng = random.Random(46)
    write_mnli("tests/data/mnli_synthetic_train.tsv", mnli_rows(rng, 300, 0))
    write_mnli("tests/data/mnli_synthetic_dev_matched.tsv", mnli_rows(rng, 60, 1000))
    with open("tests/data/race_tiny/train/passages.txt", "w") as f:
        f.write("\n".join(race_passages(rng, 60)) + "\n")
    with open("tests/data/race_tiny/dev/passages.txt", "w") as f:
        f.write("\n".join(race_passages(rng, 12)) + "\n")


if __name__ == "__main__":
    main()
