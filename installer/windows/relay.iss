; Inno Setup script for the Windows installer (Setup.exe). installer/build.sh runs it when `iscc`
; is on PATH, with /DAppVersion=... /DDistDir=<dist\relay>; by hand:
;   iscc /DAppVersion=0.1.0 /DDistDir=build\bundle\dist\relay installer\windows\relay.iss
#ifndef AppVersion
  #define AppVersion "0.0.0"
#endif
#ifndef DistDir
  #define DistDir "..\..\build\bundle\dist\relay"
#endif

[Setup]
AppId={{6E0C7F5A-4C1B-4E0B-9D55-2B6F3A1E7C21}
AppName=Relay
AppVersion={#AppVersion}
AppPublisher=Relay
DefaultDirName={autopf}\Relay
DefaultGroupName=Relay
LicenseFile=..\..\LICENSE
OutputBaseFilename=Relay-{#AppVersion}-windows-Setup
Compression=lzma2
SolidCompression=yes
ArchitecturesInstallIn64BitMode=x64compatible
PrivilegesRequiredOverridesAllowed=dialog

[Files]
Source: "{#DistDir}\*"; DestDir: "{app}"; Flags: recursesubdirs createallsubdirs ignoreversion

[Icons]
Name: "{group}\Relay"; Filename: "{app}\Relay.exe"
Name: "{autodesktop}\Relay"; Filename: "{app}\Relay.exe"; Tasks: desktopicon

[Tasks]
Name: desktopicon; Description: "Create a desktop shortcut"; Flags: unchecked

[Run]
Filename: "{app}\Relay.exe"; Description: "Start Relay"; Flags: nowait postinstall skipifsilent
