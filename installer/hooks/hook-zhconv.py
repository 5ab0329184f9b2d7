# zhconv reads its conversion table (zhcdict.json) beside the module.
from PyInstaller.utils.hooks import collect_data_files

datas = collect_data_files("zhconv")
