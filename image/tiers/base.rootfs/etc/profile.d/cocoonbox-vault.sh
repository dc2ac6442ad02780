# shellcheck shell=sh
# Contract: Box API keys. Login shells get the box's API key placeholders:
# /run/cocoonbox-vault/vault.sh exports one variable per key
# (NAME='placeholder') and unsets the names whose keys are gone. It is
# written by /usr/local/lib/cocoonbox/vault; it holds only export and
# unset lines. Before the first render there is no file, and nothing is
# done. Once there, the vault replaces the whole directory in one
# rename(RENAME_EXCHANGE), so the file never goes missing between the
# test and the source.
if [ -r /run/cocoonbox-vault/vault.sh ]; then
	. /run/cocoonbox-vault/vault.sh
fi
