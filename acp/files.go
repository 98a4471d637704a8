package acp

import (
	stdctx "context"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/services/editor"
)

// clientFiles reads and writes files through the editor
// (fs/read_text_file, fs/write_text_file), so the model sees the person's
// unsaved changes and its edits show in the editor's buffers. It is lent
// to the file tools of one session's calls (package editor); what the
// client did not offer in initialize is left to the disk.
type clientFiles struct {
	conn          *acp.AgentSideConnection
	session       acp.SessionId
	read, written bool
}

// filesOf is the session's clientFiles, or nil when the client offers
// neither operation.
func (st *conv) filesOf() editor.Files {
	st.srv.mu.Lock()
	fs := st.srv.client.Fs
	st.srv.mu.Unlock()
	if !fs.ReadTextFile && !fs.WriteTextFile {
		return nil
	}
	return clientFiles{conn: st.srv.conn, session: st.id, read: fs.ReadTextFile, written: fs.WriteTextFile}
}

func (f clientFiles) ReadTextFile(ctx stdctx.Context, path string) (string, error) {
	if !f.read {
		return "", editor.ErrNotOffered
	}
	r, err := f.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: f.session, Path: path})
	if err != nil {
		return "", err
	}
	return r.Content, nil
}

func (f clientFiles) WriteTextFile(ctx stdctx.Context, path, text string) error {
	if !f.written {
		return editor.ErrNotOffered
	}
	_, err := f.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: f.session, Path: path, Content: text})
	return err
}
