-- A username cannot be registered when an existing one differs from it only in case or in Unicode
-- compatibility form (`PCA` beside `pcA`, full-width `ｐｃＡ`): such a look-alike could pass for the
-- other account to an administrator, in a referral or in a log. Logins still match the name exactly.
-- insertAccount (console-api/accounts/account-store.ts) answers a violation USERNAME_TAKEN.
--
-- NFKC needs a UTF-8 database; on another encoding the names are folded by case only. Where look-
-- alikes exist already the index cannot be built: the migration says so and leaves them, and the
-- index is built once they are renamed and this file's statement is run again by hand.
DO $$
BEGIN
  IF current_setting('server_encoding') = 'UTF8' THEN
    IF EXISTS (SELECT 1 FROM users GROUP BY lower(normalize(username, NFKC)) HAVING count(*) > 1) THEN
      RAISE WARNING 'users: usernames equal but for case or Unicode form exist; index users_username_folded not built';
    ELSE
      CREATE UNIQUE INDEX IF NOT EXISTS users_username_folded ON users (lower(normalize(username, NFKC)));
    END IF;
  ELSIF EXISTS (SELECT 1 FROM users GROUP BY lower(username) HAVING count(*) > 1) THEN
    RAISE WARNING 'users: usernames equal but for case exist; index users_username_folded not built';
  ELSE
    CREATE UNIQUE INDEX IF NOT EXISTS users_username_folded ON users (lower(username));
  END IF;
END $$;
