# Piper phonemises through espeak-ng (piper/espeakbridge.so, statically linked), which reads its
# data folder beside the module (piper/espeak-ng-data). All languages are kept: an imported Piper
# voice may speak any of them. The training code, HTTP server and web templates are left out.
from PyInstaller.utils.hooks import collect_data_files

datas = collect_data_files("piper", includes=["espeak-ng-data/**/*"])
excludedimports = ["piper.train", "piper.http_server", "flask", "torch", "lightning"]
