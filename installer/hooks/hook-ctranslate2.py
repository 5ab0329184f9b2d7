# CTranslate2's extension links libctranslate2 and libgomp from ctranslate2.libs/ (auditwheel) on
# Linux, which PyInstaller follows; on Windows and macOS the libraries sit inside the package
# folder, so collect those explicitly. Its converters import training frameworks lazily; the app
# never converts models (the spec excludes them).
from PyInstaller.utils.hooks import collect_dynamic_libs

binaries = collect_dynamic_libs("ctranslate2")
