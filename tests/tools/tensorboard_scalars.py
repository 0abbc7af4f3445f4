#!/usr/bin/env python3
"""tensorboard_scalars.py: the scalars of TensorBoard event files, one "TAG<TAB>STEP<TAB>VALUE"
line each, for the tests. Reads the TFRecord framing (every length and record CRC-32C checked,
the CRC itself checked against the standard check value first) and decodes the Event protocol
buffers generically, from the field numbers of tensorflow's event.proto and summary.proto.
Where the tensorboard package is installed, its EventAccumulator must read the same scalars.
    python3 tests/tools/tensorboard_scalars.py DIR"""
import glob
import os
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def fields(data):
    """(field number, wire type, value) of a protocol buffer message"""
    i = 0
    while i < len(data):
        key, i = varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            length, i = varint(data, i)
            value, i = data[i:i + length], i + length
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            sys.exit(f"unexpected wire type {wire}")
        yield number, wire, value


def varint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def scalars(path):
    data = open(path, "rb").read()
    i, out, version = 0, [], None
    while i < len(data):
        header = data[i:i + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[i + 8:i + 12])
        record = data[i + 12:i + 12 + length]
        (record_crc,) = struct.unpack("<I", data[i + 12 + length:i + 16 + length])
        if length_crc != masked(crc32c(header)) or record_crc != masked(crc32c(record)):
            sys.exit(f"{path}: bad CRC at byte {i}")
        i += 16 + length
        step, summary = 0, None
        for number, _, value in fields(record):
            if number == 2:
                step = value
            elif number == 3:
                version = value.decode()
            elif number == 5:
                summary = value
        for number, _, value in fields(summary or b""):
            tag, simple = None, None
            for n, wire, v in fields(value):
                if n == 1:
                    tag = v.decode()
                elif n == 2 and wire == 5:
                    (simple,) = struct.unpack("<f", v)
            if number == 1 and tag is not None and simple is not None:
                out.append((tag, step, simple))
    if version != "brain.Event:2":
        sys.exit(f"{path}: no file_version brain.Event:2 (got {version})")
    return out


def main():
    assert crc32c(b"123456789") == 0xE3069283  # CRC-32C's check value
    files = sorted(glob.glob(os.path.join(sys.argv[1], "events.out.tfevents.*")))
    if not files:
        sys.exit(f"{sys.argv[1]}: no events.out.tfevents.* file")
    found = [s for f in files for s in scalars(f)]
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        EventAccumulator = None
    if EventAccumulator:
        accumulator = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
        accumulator.Reload()
        theirs = sorted((t, e.step, e.value) for t in accumulator.Tags()["scalars"] for e in accumulator.Scalars(t))
        if theirs != sorted(found):
            sys.exit("tensorboard's EventAccumulator reads other scalars")
    for tag, step, value in found:
        print(f"{tag}\t{step}\t{value!r}")


main()
