# Relay uses jieba only for word boundaries (app/backends/zh_words.py: jieba.Tokenizer().cut), which
# needs the main dictionary and the HMM tables in jieba/finalseg. Keyword extraction (analyse),
# part-of-speech tagging (posseg) and the Paddle model (lac_small) are ~25 MB the app never loads.
# (Replaces the contrib hook, which collects every data file.)
from PyInstaller.utils.hooks import collect_data_files

datas = collect_data_files("jieba", includes=["dict.txt", "finalseg/*.p"])
excludedimports = ["jieba.analyse", "jieba.posseg", "jieba.lac_small", "paddle"]
